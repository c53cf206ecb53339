"""The ``kernelskill`` command line: ``main`` parses and dispatches (``main.py``), one module per
command group (``evaluate``, ``optimize``, ``bench``, ``skills``), what they share in ``common``."""
from .main import build_parser, main

__all__ = ["build_parser", "main"]
