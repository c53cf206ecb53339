"""Run the adversarial suite and print its table: case, pattern, where it is documented, backend,
expected verdict, verdict, whether it was caught, the flags that caught it.

    python benchmarks/adversarial_table.py [--backend cpp|cuda] [--only NAME ...]

"caught" means the verdict is the expected one: a cheat flagged or judged incorrect, an honest twin
left ok. docs/evaluator.md quotes the latest tables (cpp here, cuda on the GPU machine).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from adversarial.cases import CASES  # noqa: E402
from adversarial.test_adversarial import judge  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="cpp", choices=["cpp", "cuda"])
    ap.add_argument("--only", nargs="*", help="only these cases")
    args = ap.parse_args()
    print(f"| case | pattern | documented | {args.backend} expected | verdict | caught | flags | s |\n"
          "|---|---|---|---|---|---|---|---|", flush=True)
    rows, held = 0, 0
    for case in CASES:
        if args.backend not in case.backends or (args.only and case.name not in args.only):
            continue
        t = time.perf_counter()
        r = judge(case, args.backend)
        ok = r.status == case.expect or (case.name == "illegal-address" and r.status in ("runtime_error", "crashed"))
        held, rows = held + ok, rows + 1
        flags = ", ".join(sorted({f.split(":")[0] for f in r.flags})) or "-"
        print(f"| {case.name} | {case.trick} | {case.documented} | {case.expect} | {r.status} | {'✓' if ok else '✗'} | "
              f"{flags} | {time.perf_counter() - t:.1f} |", flush=True)
    print(f"\n{held}/{rows} verdicts as expected ({args.backend})")


if __name__ == "__main__":
    main()
