"""``kernelskill eval``, ``profile``, ``compile``, ``machine``, ``warm`` and ``task show``: the evaluator
from the command line."""
from __future__ import annotations

import json

from .common import emit, exit_code, load_task, progress, timeouts


def worker_ahead() -> None:
    """This command's first worker starts importing torch now, beside this process's own import
    (which the lines after this one begin): a one-shot command's call is shorter by one import."""
    from kernelskill.evaluate.launch import isolation
    isolation.start_one_ahead()


def cmd_eval(args) -> int:
    worker_ahead()
    from ..candidate import Candidate
    from kernelskill.evaluate.api import Options, evaluate
    from kernelskill.evaluate.worker.timing import TimingConfig
    from .report import print_eval
    task = load_task(args)
    cand = Candidate.from_file(args.candidate)
    timing = None if args.no_timing else TimingConfig(time_cap_s=args.time_cap, retimes=args.retimes,
                                                      rounds=args.rounds, processes=args.processes)
    opts = Options(device=args.device, trials=args.trials, timing=timing, profile=not args.no_timing,
                   baseline=args.baseline, flags=args.flags, ncu=args.ncu, shapes=args.shapes,
                   shapes_timed=args.shapes_timed, **timeouts(args))
    with progress(args, opts) as on_phase:
        result = evaluate(task, cand, opts=opts, on_phase=on_phase)
    emit(result, args, print_eval)
    return exit_code(result)




def cmd_profile(args) -> int:
    """Breakdown, roofline and bottleneck of the reference (no CANDIDATE) or of a candidate."""
    worker_ahead()
    from ..candidate import Candidate
    from kernelskill.evaluate.api import Options, profile
    from kernelskill.evaluate.worker.timing import TimingConfig
    from .report import print_profile
    task = load_task(args)
    cand = Candidate.from_file(args.candidate) if args.candidate else None
    opts = Options(device=args.device, trials=args.trials,
                   timing=TimingConfig(time_cap_s=args.time_cap, retimes=args.retimes, rounds=args.rounds,
                                       processes=args.processes),
                   baseline=args.baseline, flags=args.flags, ncu=args.ncu, remeasure_ceilings=args.remeasure_ceilings,
                   **timeouts(args))
    with progress(args, opts) as on_phase:
        result = profile(task, cand, opts=opts, on_phase=on_phase)
    emit(result, args, lambda r: print_profile(r, reference=cand is None))
    return 0 if cand is None and result.profile is not None else exit_code(result)


def cmd_compile(args) -> int:
    worker_ahead()
    from ..candidate import Candidate
    from kernelskill.evaluate.api import Options, compile
    from .report import print_compile
    opts = Options(**timeouts(args))
    with progress(args, opts) as on_phase:
        if on_phase:
            on_phase("build")
        res = compile(Candidate.from_file(args.candidate), device=args.device, opts=opts)
    emit(res, args, print_compile)
    return 0 if res.ok else 1


def cmd_machine(args) -> int:
    from kernelskill.evaluate.api import Options, machine, resolve_device
    from kernelskill.evaluate.machine import render
    device = resolve_device(args.device)
    profile = machine(device, Options(device=device), refresh=args.refresh)
    if args.json:
        print(json.dumps(profile, indent=2))
    else:
        print(render(profile, "cpp" if device == "cpu" else "cuda"))
    return 0


def cmd_warm(args) -> int:
    import shlex
    from kernelskill.evaluate.build import direct as toolchain
    from kernelskill.evaluate.build.extensions import build_root
    sets = [shlex.split(f) for f in args.flags]
    if not args.only:
        sets += [[], ["-O2"], ["-O3"]] + toolchain.shipped_flag_sets()
    unique = []
    for flags in sets:
        if flags not in unique:
            unique.append(flags)
    root = build_root()
    print(f"precompiled headers under {root / '_pch'}: the bindings' and {len(unique)} flag sets"
          + (" (in the background)" if args.background else ""))
    toolchain.warm(root, unique, wait=not args.background)
    return 0


def cmd_task_show(args) -> int:
    from .report import print_task
    info = load_task(args).summary()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print_task(info)
    return 0
