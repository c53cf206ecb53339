"""The run that ``kernelskill tui --demo`` replays: a real optimizer run on the shipped ``relu_gelu``
example (cpp backend, the LLM scripted), stored in ``run/``. ``tests/tui/data/make_demo_run.py``
makes it again."""
from pathlib import Path

DEMO_RUN = Path(__file__).resolve().parent / "run"
