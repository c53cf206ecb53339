"""Building a candidate's extensions: where its sources become a loaded module.

``extensions`` hooks ``load_inline`` inside the worker (cache by content, compile-only where CUDA
cannot run, diagnostics mapped to the candidate's lines); ``direct`` is the fast path it takes
(translation units cached one by one, precompiled headers, the C++ compiler and nvcc lookups);
``cuda_split`` and ``nvcc_phases`` keep torch's headers out of nvcc; ``linkcheck`` resolves symbols
where nothing can load; ``own_builds`` marks the tool's background builds so no timing runs beside
them; ``step`` is the parent's side: compile() in a worker and the CompileResult of any reply.
"""
