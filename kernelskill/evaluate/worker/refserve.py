"""Mode ``refserve``: a reference server that keeps the reference model loaded and recomputes its
outputs on request, so huge tasks' outputs are compared without files."""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from kernelskill.evaluate import flags as _flags
from . import handoff
from kernelskill.vocab import WorkerStatus
from kernelskill.evaluate.launch.request import WorkerRequest
from .core import _cpu, _save_atomic, _seeded_call, _setup, _write_json_atomic, call_seed, orphaned, set_phase
from .candidate import _reference_data, _reference_model


def mode_refserve(req: WorkerRequest, out: Path) -> dict:
    """A trusted reference worker (no candidate code) for tasks whose outputs are not stored
    (memory plan ``recompute``). It answers the parent's request files until ``stop`` or the
    parent's death:

    The requests and answers are files in ``serve_dir`` (the parent's; this worker may be a spare
    started elsewhere), its phases in its own folder as every worker's.

    ``want_I``      trial I's reference outputs (under its call seed) → ``ref_I.pt``
    ``cmp_I_K.json`` {"file", "key", "trial", "seed", "dist", "atol", "rtol"}: a candidate's outputs
                    (a file the candidate's worker wrote, or its JSON description of outputs shared
                    in memory; ``key`` picks one entry of a dict, or one set of the description) loaded
                    straight to the device and compared there with trial I's reference outputs
                    → ``res_I_K.json`` (the TrialResult). Gigabytes never cross to the host twice.
    """
    from kernelskill.evaluate.judge.correctness import compare_trial
    from kernelskill.results import to_dict
    device = _setup(req)
    _flags.apply(req.strict_flags or _flags.STRICT)     # the reference's outputs are the strict ones
    task, mod, init, trials, state = _reference_data(req)
    model = _reference_model(task, mod, init, state, req, device)
    box = Path(req.serve_dir or out)
    set_phase(out, "serve")
    served = 0
    with torch.no_grad():
        while not orphaned() and not (box / "stop").exists():
            wants = sorted(box.glob("want_*")) + sorted(box.glob("cmp_*.json"))
            if not wants:
                time.sleep(0.01)
                continue
            for w in wants:
                if w.name.startswith("want_"):
                    i = int(w.name.split("_")[1])
                    outs, _ = _seeded_call(model, trials.get(i), device, call_seed(req.seed, i))
                    _save_atomic(outs, box / f"ref_{i}.pt")
                else:
                    ask = json.loads(w.read_text())
                    i = int(ask["trial"])
                    want, _ = _seeded_call(model, trials.get(i), device, call_seed(req.seed, i), cpu=False)
                    try:
                        if ask["file"].endswith(".json"):     # shared in memory (handoff.py)
                            sets = json.loads(Path(ask["file"]).read_text())["sets"]
                            got = handoff.open_outputs(sets[str(ask["key"])], device)
                        else:
                            got = torch.load(ask["file"], weights_only=True, map_location=device)
                            if ask.get("key") is not None:
                                got = got[ask["key"]]
                            got = list(got)
                    except Exception as e:  # noqa: BLE001 — anything but plain tensors: the parent flags it
                        got, answer = None, {"unreadable": f"{type(e).__name__}: {e}"[:300]}
                    if got is not None:
                        args = (i, int(ask["seed"]), ask["dist"])
                        # One number, or one per output (verdict.tolerances).
                        tol = tuple([float(x) for x in t] if isinstance(t, list) else float(t)
                                    for t in (ask["atol"], ask["rtol"]))
                        try:
                            res, lines = compare_trial(*args, got, want, *tol)
                        except torch.OutOfMemoryError:
                            # Non-finite values take the exact (float64) path: on the host, which has room.
                            torch.cuda.empty_cache()
                            res, lines = compare_trial(*args, _cpu(got), _cpu(want), *tol)
                        answer = {"result": to_dict(res), "lines": lines}
                    del want
                    got = None                       # a shared output is released here, before the answer
                    if device.startswith("cuda"):
                        torch.cuda.synchronize()
                        torch.cuda.empty_cache()     # the candidate's worker shares this GPU
                    _write_json_atomic(box / w.name.replace("cmp_", "res_"), answer)
                w.unlink()
                served += 1
                set_phase(out, "serve")          # each answer restarts the phase's clock
    return {"status": WorkerStatus.ok, "served": served}
