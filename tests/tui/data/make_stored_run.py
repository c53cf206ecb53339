"""Write the stored run the TUI's snapshot tests open (``stored_runs/20250101-120000-relu_task-0001``).

A real run of the optimizer tests' scenario on the cpp backend (scripted LLM, real evaluator),
then renamed to a fixed id with fixed timestamps, so a snapshot of it never changes:
n1 incorrect → n2 its repair (ok) → n3 crashed → n4 its repair (identical to n2).

    python tests/tui/data/make_stored_run.py      # rewrites tests/tui/data/stored_runs/
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

import tomli_w

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "tests" / "optimizer"))
os.environ.setdefault("KERNELSKILL_CACHE", str(ROOT / ".kernelskill-cache"))     # the tests' build cache

from scenario import BUGGY, EVAL_FLAGS, RELU_TASK, Scenario  # noqa: E402
from helpers import toolkit_candidate  # noqa: E402

RUN_ID = "20250101-120000-relu_task-0001"
CRASH = toolkit_candidate("ext.segfault()\nreturn x")
T0 = 1735732800.0                      # 2025-01-01 12:00:00 UTC


def main() -> None:
    from kernelskill.config import load_config
    from kernelskill.llm import ScriptedLLM
    from kernelskill.optimizer import Optimizer
    from kernelskill.task import Task
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["KERNELSKILL_HOME"] = tmp              # skill statistics stay out of the user's store
        config = load_config({**EVAL_FLAGS, "budget.attempts": 4, "search.epsilon": 0.0, "search.seed": 0,
                              "runs_dir": "runs"}, cwd=Path(tmp), env={})
        opt = Optimizer(Task.load(RELU_TASK), llm=ScriptedLLM(Scenario([BUGGY, CRASH])), config=config,
                        runs_dir=tmp)
        out = opt.run()
        dst = HERE / "stored_runs" / RUN_ID
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(out.path, dst)
    info = tomllib.loads((dst / "run.toml").read_text())
    info["run"].update(id=RUN_ID, created="2025-01-01T12:00:00", task="tests/data/relu_task.py")
    info["env"] = {"python": "3.11", "platform": "Linux", "host": "fixture", "torch": "2.x"}
    (dst / "run.toml").write_text(tomli_w.dumps(info))
    lines = []
    for i, line in enumerate((dst / "events.jsonl").read_text().splitlines()):
        ev = json.loads(line)
        ev["t"] = T0 + i
        if ev["event"] == "RunStarted":
            ev["run_id"], ev["task"] = RUN_ID, "tests/data/relu_task.py"
        if "node" in ev:
            ev["node"]["created"] = T0 + i
        lines.append(json.dumps(ev))
    (dst / "events.jsonl").write_text("\n".join(lines) + "\n")
    (dst / "report.md").write_text((dst / "report.md").read_text().replace(out.path.name, RUN_ID))
    print(dst, out.reason, [(n.id, n.status, n.speedup) for n in opt.tree])


if __name__ == "__main__":
    main()
