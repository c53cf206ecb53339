"""Correctness, decided in the trusted parent: candidate outputs against reference outputs.

Every check returns data; the mismatch report is written for the debugger agent to read.
"""
from __future__ import annotations

import math

import torch

from kernelskill.results import TrialResult, VerifyResult

# Captured at import, before any candidate code could run in this process (none ever does).
_allclose = torch.allclose
_isclose = torch.isclose
_isfinite = torch.isfinite
_isnan = torch.isnan


def at(tol, i: int) -> float:
    """Output i's tolerance: ``tol`` is one number for every output, or one per output."""
    return float(tol[min(i, len(tol) - 1)]) if isinstance(tol, (list, tuple)) else float(tol)


def compare_trial(trial: int, seed: int, dist: str, got: list, want: list, atol, rtol) -> tuple[TrialResult, str]:
    """Compare one trial's outputs; return the result and its report lines. ``atol``/``rtol``: one
    number, or one per output (verdict.tolerances raises an output's to what the user's eager needs)."""
    res = TrialResult(trial=trial, seed=seed, distribution=dist, ok=True)
    if len(got) != len(want):
        return _fail(res, "structure", f"{len(got)} outputs, expected {len(want)}")
    worst_abs, worst_rel, frac, lines = 0.0, 0.0, 0.0, []
    tols = (atol, rtol)
    for i, (g, w) in enumerate(zip(got, want)):
        atol, rtol = at(tols[0], i), at(tols[1], i)
        tag = f"output {i}" if len(want) > 1 else "output"
        if not isinstance(g, torch.Tensor):
            return _fail(res, "type", f"{tag} is a {type(g).__name__}, expected a tensor")
        if g.shape != w.shape:
            return _fail(res, "shape", f"{tag} has shape {tuple(g.shape)}, expected {tuple(w.shape)}")
        if g.dtype != w.dtype:
            return _fail(res, "dtype", f"{tag} has dtype {g.dtype}, expected {w.dtype}")
        if w.numel() == 0:
            continue
        fast = _compare_finite(g, w, atol, rtol)
        if fast is not None:
            abs_err, rel_err, n_bad, top = fast
            worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
            frac = max(frac, n_bad / w.numel())
            if n_bad:
                lines.append(_worst_lines(tag, n_bad, top, g, w))
            elif rel_err > rtol and math.isfinite(rel_err):     # an all-zero reference has no relative error
                lines.append(f"{tag}: elementwise within tolerance but relative error ‖out−ref‖/‖ref‖ = "
                             f"{rel_err:.3g} > {rtol:g}")
                res.check = res.check or "relative-error"
            continue
        gf, wf = g.double(), w.double()
        fin_g, fin_w = _isfinite(gf), _isfinite(wf)
        if not torch.equal(fin_g, fin_w) or not torch.equal(_isnan(gf), _isnan(wf)):
            bad = (fin_g != fin_w) | (_isnan(gf) != _isnan(wf))
            idx = _index(bad.nonzero()[0], w.shape)
            return _fail(res, "nan-inf", f"{tag}: NaN/Inf where the reference has none (or the reverse): "
                         f"{int(bad.sum())} elements, first at {idx}: got {g[idx].item()}, expected {w[idx].item()}")
        non_finite_match = ~fin_w & ((gf == wf) | (_isnan(gf) & _isnan(wf)))
        diff = (gf - wf).abs().masked_fill(non_finite_match, 0.0)
        bad = ~_isclose(gf, wf, rtol=rtol, atol=atol, equal_nan=True)
        d_fin, w_fin = diff[fin_w], wf[fin_w]
        abs_err = float(d_fin.max()) if d_fin.numel() else 0.0
        denom = float(w_fin.norm())
        rel_err = float(d_fin.norm()) / denom if denom > 0 else (0.0 if float(d_fin.norm()) == 0 else math.inf)
        worst_abs, worst_rel = max(worst_abs, abs_err), max(worst_rel, rel_err)
        n_bad = int(bad.sum())
        frac = max(frac, n_bad / w.numel())
        if n_bad:
            lines.append(_worst_lines(tag, n_bad, _top_bad(diff.flatten(), bad.flatten(), 0, n_bad), g, w))
        elif rel_err > rtol and denom > 0:
            lines.append(f"{tag}: elementwise within tolerance but relative error ‖out−ref‖/‖ref‖ = "
                         f"{rel_err:.3g} > {rtol:g}")
            res.check = res.check or "relative-error"
    res.max_abs_err, res.max_rel_err, res.mismatch_fraction = worst_abs, worst_rel, frac
    if lines:
        res.ok = False
        res.check = res.check or "allclose"
        res.message = lines[0].splitlines()[0]
    return res, "\n".join(lines)


# Elements compared per pass: a reference of a KernelBench level-1 task as shipped holds gigabytes,
# and a comparison's temporaries (|diff|, the tolerance, the mask) would be as large again, twice.
CHUNK = 1 << 26
WORST = 5             # the worst elements a mismatch report names


def _compare_finite(g: torch.Tensor, w: torch.Tensor, atol: float, rtol: float):
    """The common case, fast: both outputs finite. Works in float32 (float64 for float64 outputs)
    in passes of ``CHUNK`` elements, so the memory it needs beyond the two outputs is bounded.

    Returns (max abs err, relative error, elements outside tolerance, the worst of them as
    [(flat index, |diff|)]), or None when either side has a NaN/Inf (the caller's exact path
    reports those)."""
    if not (w.is_floating_point() and g.is_floating_point()):
        return None
    work = torch.float64 if w.dtype == torch.float64 else torch.float32
    gflat, wflat = g.reshape(-1), w.reshape(-1)
    abs_err, n_bad, sq_diff, sq_want, top = 0.0, 0, 0.0, 0.0, []
    for start in range(0, wflat.numel(), CHUNK):
        gf, wf = gflat[start:start + CHUNK].to(work), wflat[start:start + CHUNK].to(work)
        if not (bool(_isfinite(wf).all()) and bool(_isfinite(gf).all())):
            return None
        diff = torch.sub(gf, wf).abs_()
        # allclose's rule: |got − want| ≤ atol + rtol·|want|
        bad = diff > wf.abs().mul_(rtol).add_(atol)
        chunk_bad = int(bad.sum())
        n_bad += chunk_bad
        abs_err = max(abs_err, float(diff.max()))
        sq_diff += float(torch.linalg.vector_norm(diff)) ** 2
        sq_want += float(torch.linalg.vector_norm(wf)) ** 2
        if chunk_bad:
            top = sorted(top + _top_bad(diff, bad, start, chunk_bad), key=lambda t: -t[1])[:WORST]
        del gf, wf, diff, bad
    num, denom = math.sqrt(sq_diff), math.sqrt(sq_want)
    rel = num / denom if denom > 0 else (0.0 if num == 0 else math.inf)
    return abs_err, rel, n_bad, top


def _top_bad(diff: torch.Tensor, bad: torch.Tensor, offset: int, n_bad: int) -> list[tuple[int, float]]:
    """The worst elements outside tolerance of a flat pass starting at ``offset``: [(flat index, |diff|)]."""
    masked = diff.masked_fill(~bad, -1.0)
    vals, idx = torch.topk(masked, min(WORST, n_bad))
    return [(offset + int(i), float(v)) for i, v in zip(idx.tolist(), vals.tolist())]


def _fail(res: TrialResult, check: str, msg: str) -> tuple[TrialResult, str]:
    res.ok, res.check, res.message = False, check, msg
    return res, msg


def _index(flat_or_nd, shape) -> tuple:
    return tuple(int(i) for i in flat_or_nd)


def _worst_lines(tag: str, n_bad: int, top: list[tuple[int, float]], g: torch.Tensor, w: torch.Tensor) -> str:
    """The first line is whole on its own (it is the trial's message and an MCP summary): the count
    and the worst element; the next worst follow, one per line."""
    n = w.numel()
    at = []
    for flat, d in top:
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), w.shape))
        at.append(f"at {list(idx)}: got {g[idx].item():.6g}, expected {w[idx].item():.6g} (|diff| {d:.3g})")
    head = f"{tag}: {n_bad} of {n} elements ({100 * n_bad / n:.3g} %) outside tolerance"
    out = [head + (f"; worst: {at[0]}" if at else "")]
    if len(at) > 1:
        out.append("  next worst:")
        out += [f"  {a}" for a in at[1:]]
    return "\n".join(out)


def deviation(got: list, want: list, atol: float, rtol: float) -> list[dict]:
    """How far ``got`` is from ``want``, output by output, as multiples of the tolerance: ``ratio``,
    the worst max |got − want| / (atol + rtol·|want|) (1: exactly at allclose's limit); ``rel``,
    ‖got − want‖ / ‖want‖ ÷ rtol; ``max_abs``. Finite elements only (NaN/Inf are placed alike
    or the outputs are not comparable: ``nonfinite`` says how many differ in place)."""
    out = []
    for g, w in zip(got, want):
        if not (isinstance(g, torch.Tensor) and isinstance(w, torch.Tensor)) or g.shape != w.shape \
                or not w.is_floating_point() or w.numel() == 0:
            out.append({"ratio": 0.0, "rel": 0.0, "max_abs": 0.0})
            continue
        work = torch.float64 if w.dtype == torch.float64 else torch.float32
        gflat, wflat = g.reshape(-1), w.reshape(-1)
        ratio, max_abs, sq_diff, sq_want, nonfinite = 0.0, 0.0, 0.0, 0.0, 0
        for start in range(0, wflat.numel(), CHUNK):
            gf, wf = gflat[start:start + CHUNK].to(work), wflat[start:start + CHUNK].to(work)
            fin = _isfinite(gf) & _isfinite(wf)
            nonfinite += int((_isfinite(gf) != _isfinite(wf)).sum())
            gf, wf = gf[fin], wf[fin]
            if not gf.numel():
                continue
            diff = torch.sub(gf, wf).abs_()
            max_abs = max(max_abs, float(diff.max()))
            ratio = max(ratio, float((diff / wf.abs().mul_(rtol).add_(atol)).max()))
            sq_diff += float(torch.linalg.vector_norm(diff)) ** 2
            sq_want += float(torch.linalg.vector_norm(wf)) ** 2
            del gf, wf, diff, fin
        rel = (math.sqrt(sq_diff) / math.sqrt(sq_want) / rtol) if sq_want > 0 and rtol > 0 else 0.0
        out.append({"ratio": ratio, "rel": rel, "max_abs": max_abs} | ({"nonfinite": nonfinite} if nonfinite else {}))
    return out


def verify_outputs(cand: list[list], ref: list[list], seeds: list[int], dists: list[str],
                   atol, rtol) -> VerifyResult:
    """All trials: the verdict, the worst errors and a mismatch report."""
    compared = [compare_trial(i, seeds[i], dists[i], got, want, atol, rtol)
                for i, (got, want) in enumerate(zip(cand, ref))]
    return summarize(compared, len(ref), at(atol, 0), at(rtol, 0))


def raised_text(tolerances: list[dict] | None) -> str:
    """What a mismatch report says of tolerances raised to the user's eager (verdict.tolerances)."""
    raised = [t for t in tolerances or [] if t.get("raised")]
    return "".join(f"; output {t['output']}'s raised to atol={t['effective_atol']:.3g}, rtol={t['effective_rtol']:.3g}: "
                   f"{t['margin']:g}× how far PyTorch's default-flag eager is from the strict fp32 reference "
                   f"({t['eager_ratio']:.3g}× the task's tolerance)" for t in raised)


def summarize(compared: list[tuple[TrialResult, str]], n_ref: int, atol: float, rtol: float,
              tolerances: list[dict] | None = None) -> VerifyResult:
    """The verdict over trials compared one by one (``compare_trial``'s results, in order);
    ``atol``/``rtol`` the task's, ``tolerances`` each output's as compared (verdict.tolerances)."""
    trials = [res for res, _ in compared]
    report = [f"trial {res.trial} (seed {res.seed}, {res.distribution} inputs) failed the {res.check} check:\n{text}"
              for res, text in compared if not res.ok]
    errs = [t for t in trials if t.max_abs_err is not None]
    correct = all(t.ok for t in trials) and len(trials) == n_ref
    summary = ""
    if not correct:
        failed = [t for t in trials if not t.ok]
        summary = (f"{len(failed)} of {len(trials)} trials failed (tolerance atol={atol:g}, rtol={rtol:g}"
                   f"{raised_text(tolerances)}).\n"
                   + "\n".join(report[:3]))
        summary += "\nPer-trial: " + "; ".join(
            f"#{t.trial} {'ok' if t.ok else t.check} max_abs={_fmt(t.max_abs_err)} rel={_fmt(t.max_rel_err)}"
            for t in trials)
    return VerifyResult(correct=correct, trials=trials,
                        max_abs_err=max((t.max_abs_err for t in errs), default=None),
                        max_rel_err=max((t.max_rel_err for t in errs), default=None),
                        mismatch=summary, atol=atol, rtol=rtol, tolerances=list(tolerances or []))


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3g}"
