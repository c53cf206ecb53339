"""``python -m kernelskill.cli``: the same as ``python -m kernelskill`` and the ``kernelskill`` command."""
import sys

from .main import main

sys.exit(main())
