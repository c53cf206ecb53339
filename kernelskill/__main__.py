"""``python -m kernelskill``: the same entry point as the ``kernelskill`` console script."""
import sys

from .cli import main

sys.exit(main())
