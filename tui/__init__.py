"""Textual dashboard (installed as kernelskill.tui)."""
