"""Judge one adversarial case and print everything the evaluator said (status, message, flags,
log tail, seconds): for a case whose verdict surprised you.

    python benchmarks/adversarial_case.py NAME [--backend cpp|cuda]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from adversarial.cases import CASES  # noqa: E402
from adversarial.test_adversarial import judge  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=[c.name for c in CASES], metavar="NAME")
    ap.add_argument("--backend", default="cpp", choices=["cpp", "cuda"])
    args = ap.parse_args()
    case = next(c for c in CASES if c.name == args.name)
    t = time.perf_counter()
    r = judge(case, args.backend)
    print(json.dumps({"case": case.name, "expected": case.expect, "status": r.status, "message": r.message,
                      "flags": r.flags, "seconds": round(time.perf_counter() - t, 1),
                      "compile": r.compile.to_dict() if hasattr(r.compile, "to_dict") else str(r.compile),
                      "log_tail": r.log_tail[-3000:]}, indent=2, default=str))


if __name__ == "__main__":
    main()
