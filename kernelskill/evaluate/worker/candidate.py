"""Mode ``compile`` and what every candidate-running mode starts with: the candidate imported
(its ``load_inline`` builds through the build cache), the reference's data read back, both models
built under the reference's seed and given its weights."""
from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path

import torch

from kernelskill.evaluate.build import extensions as _build
from . import guards
from . import trials as trials_mod
from kernelskill.errors import tail
from kernelskill.vocab import WorkerStatus
from kernelskill.evaluate.launch.reply import ReferenceMeta
from kernelskill.evaluate.launch.request import WorkerRequest
from .core import _load_task, _setup, set_phase


# ---- candidate ------------------------------------------------------------------------------
def import_candidate(req: WorkerRequest, log: _build.BuildLog, source_path: str | None = None,
                     name: str = "candidate_module"):
    """Import the candidate from a real file (Triton needs its source on disk)."""
    source = Path(source_path or req.candidate_path).read_text()
    out = Path(req.out_dir) if req.out_dir else None
    _build.install(source, log, Path(req.cache_root) if req.cache_root else None,
                   on_step=(lambda text: set_phase(out, "step " + text.replace("\n", " "))) if out else None,
                   direct=req.build != "torch", cuda_arch=req.cuda_arch)
    path = Path.cwd() / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _compile_failure(e: BaseException, log: _build.BuildLog, req: WorkerRequest) -> dict:
    from kernelskill.results import Diagnostic
    if isinstance(e, _build.CompileOnly):
        return {"status": WorkerStatus.compile_only, "build": _buildlog(log)}
    if isinstance(e, _build.BuildFailed):
        return {"status": WorkerStatus.compile_error, "build": _buildlog(log), "error": str(e)}
    line, text = guards.candidate_line(e)
    if isinstance(e, SyntaxError) and e.filename and e.filename.endswith("candidate_module.py"):
        line, text = e.lineno, e.text or ""
    what = e.msg if isinstance(e, SyntaxError) else e      # the location goes in the diagnostic, not the text
    diag = Diagnostic("error", f"{type(e).__name__}: {what}".strip()[:1000], line=line, column=getattr(e, "offset", None)
                      if isinstance(e, SyntaxError) else None, source_line=text or "", origin="python")
    log.diagnostics.append(diag)
    log.log_tail = tail(traceback.format_exc())
    return {"status": WorkerStatus.compile_error, "build": _buildlog(log), "error": diag.message}


def _buildlog(log: _build.BuildLog) -> dict:
    from kernelskill.results import to_dict
    return to_dict(log)


def mode_compile(req: WorkerRequest, out: Path) -> dict:
    _setup(req)
    log = _build.BuildLog()
    set_phase(out, "build")
    try:
        module = import_candidate(req, log)
    except Exception as e:  # noqa: BLE001 — any failure to import is the candidate's compile error
        return _compile_failure(e, log, req)
    if not isinstance(getattr(module, "ModelNew", None), type):
        from kernelskill.results import Diagnostic
        log.diagnostics.append(Diagnostic("error", "the candidate defines no class `ModelNew`", origin="python"))
        return {"status": WorkerStatus.compile_error, "build": _buildlog(log), "error": "no ModelNew"}
    return {"status": WorkerStatus.ok, "build": _buildlog(log), "module": module}


def _reference_data(req: WorkerRequest):
    """The task, its module and constructor arguments, the trial inputs and the weights.

    ``trials.get(i)`` puts trial i on the device: memory-mapped from the reference cache, or
    regenerated from its seed (trials.py)."""
    ref_dir = Path(req.ref_dir)
    task = _load_task(req)
    mod = task.module()
    init = task.init_inputs(mod)
    trials = trials_mod.TrialInputs(ref_dir, ReferenceMeta.load(ref_dir), task, mod, req.device)
    state = torch.load(ref_dir / "state.pt", weights_only=True)
    return task, mod, init, trials, state


def _candidate_model(module, init: list, state: dict, req: WorkerRequest, device: str):
    """ModelNew built under the reference's seed, weights aligned; (model, alignment report)."""
    torch.manual_seed(req.seed)
    model = module.ModelNew(*init)
    aligned = guards.align_weights(model, state)
    return model.to(device), aligned


def _reference_model(task, mod, init: list, state: dict, req: WorkerRequest, device: str):
    """The task's Model built under the reference's seed, with the cached weights, on the device."""
    torch.manual_seed(req.seed)
    model = task.build_model(mod, init=init)
    model.load_state_dict(state)
    return model.to(device)
