"""What a plan changes, compared by meaning: the rules that stop the loop paying twice for one idea.

A planner names its move in one line (``mechanism``). Two phrasings of one idea ("vectorize the
inner loop with AVX2" and "AVX2 SIMD over the inner loop") must count as one, and a new number or
a different span of code must count as new. Deterministic, no model:

- ``concepts``: the mechanism's content words, lower-cased, split at letter/digit boundaries
  (``avx512`` → avx, 512: a number is a concept of its own), stemmed crudely (``vectorized`` →
  ``vector``), stop words dropped and synonyms folded onto one word (``simd`` and ``vectorize``,
  ``openmp`` and ``threads``, ``fuse`` and ``single pass``);
- ``similar``: Jaccard overlap of two concept sets at least ``SIMILAR`` (0.5);
- ``spans_overlap``: the lines of the parent's code inside the IMPROVE spans of two plans share at
  least half of the smaller set (plans that mark different code are different moves);
- ``concrete_change``: a ``differs`` claim is accepted only when it names a token (a number, an
  identifier, a word) that the new plan or its advice contains and the earlier attempt did not.
"""
from __future__ import annotations

import re
from typing import Iterable

SIMILAR = 0.5

STOP = frozenset("""a an the and or of to in on for with without by from into over per via use using
uses used is are be this that it its as at than then so same new now instead rather more less
each every all one two both only just also try again time times attempt attempts better faster
speed speedup speedups improve improved improvement kernel kernels code version approach way""".split())

# Synonyms folded onto one concept (keys are already stemmed words).
_SYNONYMS = {
    "simd": "vector", "avx": "vector", "avx2": "vector", "sse": "vector", "intrinsic": "vector",
    "vectoriz": "vector", "vectoris": "vector", "vectorization": "vector", "neon": "vector",
    "openmp": "parallel", "omp": "parallel", "thread": "parallel", "multithread": "parallel",
    "multi": "parallel", "parallelize": "parallel", "parallelise": "parallel", "parallelism": "parallel",
    "fus": "fuse", "fusion": "fuse", "fused": "fuse", "single": "fuse", "pass": "fuse", "merge": "fuse",
    "combin": "fuse", "tiling": "tile", "tiled": "tile", "block": "tile", "blocking": "tile",
    "smem": "shared", "shmem": "shared", "unroll": "unroll", "unrolling": "unroll",
    "coalesc": "coalesce", "coalesced": "coalesce", "warp": "warp", "shuffle": "warp",
    "reduc": "reduce", "reduction": "reduce", "gemm": "matmul", "mm": "matmul", "cublas": "library",
    "aten": "library", "torch": "library",
}


def normalize_mechanism(text: str) -> str:
    """Lower-case words only: two spellings of the same words compare equal."""
    return " ".join(re.findall(r"[a-z0-9]+", (text or "").lower()))


def _stem(word: str) -> str:
    for suffix in ("ations", "ation", "izing", "ising", "ized", "ised", "izes", "ises", "ize", "ise",
                   "ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def concepts(text: str) -> frozenset[str]:
    """The content words of a mechanism, stemmed and with synonyms folded (see the module docstring)."""
    out = set()
    for word in re.findall(r"[a-z]+|\d+", (text or "").lower()):
        if word in STOP or len(word) < 2 and not word.isdigit():
            continue
        stem = _stem(word)
        out.add(_SYNONYMS.get(word) or _SYNONYMS.get(stem) or stem)
    return frozenset(out)


def overlap(a: Iterable, b: Iterable) -> float:
    """Jaccard overlap of two sets; two empty sets overlap fully."""
    a, b = set(a), set(b)
    return 1.0 if not a and not b else len(a & b) / len(a | b)


def similar(a: str, b: str) -> bool:
    """Whether two mechanisms name the same idea (concept overlap at least ``SIMILAR``)."""
    return overlap(concepts(a), concepts(b)) >= SIMILAR


def spans_overlap(a: Iterable[int], b: Iterable[int]) -> bool:
    """Whether two plans marked the same code: the parent's lines inside their spans share at least
    half of the smaller set. Unknown spans (an empty set: an old run, no anchors) count as the same."""
    a, b = set(a), set(b)
    if not a or not b:
        return True
    return len(a & b) >= 0.5 * min(len(a), len(b))


def _tokens(text: str) -> set[str]:
    """Words split at every letter/digit boundary too (``avx512`` → avx, 512), stemmed."""
    return {_stem(w) for w in re.findall(r"[a-z]+|\d+", (text or "").lower()) if w not in STOP}


def concrete_change(differs: str, new_text: str, old_text: str) -> list[str]:
    """The tokens of ``differs`` that the new plan (or its advice) has and the earlier attempt had
    not: empty when ``differs`` names no change the loop can see."""
    new, old = _tokens(new_text), _tokens(old_text)
    return sorted(t for t in _tokens(differs) if t in new and t not in old)
