"""Run the adversarial suite and print its table: trick, expected verdict, verdict, flags.

    python benchmarks/adversarial_table.py [--backend cpp|cuda]
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
    args = ap.parse_args()
    rows, held = [], 0
    for case in CASES:
        if args.backend not in case.backends:
            continue
        t = time.perf_counter()
        r = judge(case, args.backend)
        ok = r.status == case.expect or (case.name == "illegal-address" and r.status in ("runtime_error", "crashed"))
        held += ok
        flags = ", ".join(sorted({f.split(":")[0] for f in r.flags})) or "-"
        rows.append((case.name, case.trick, case.expect, r.status, "✓" if ok else "✗", flags, time.perf_counter() - t))
    print(f"\n{held}/{len(rows)} verdicts as expected ({args.backend})\n")
    print("| case | trick | expected | verdict | | flags | s |\n|---|---|---|---|---|---|---|")
    for name, trick, exp, got, mark, flags, s in rows:
        print(f"| {name} | {trick} | {exp} | {got} | {mark} | {flags} | {s:.1f} |")


if __name__ == "__main__":
    main()
