"""The isolated worker: the only process that imports candidate code
(``python -m kernelskill.evaluate.worker REQUEST.json``; its modes are in ``__main__``).

What it runs beside the candidate: ``trials`` (seeded inputs and the memory plan), ``timing`` (the
timed loops; the statistics the parent computes from them), ``guards`` (backend flags, weight
alignment, memory poisoning, the candidate's line of a failure), ``handoff`` (outputs handed to
the reference worker in memory). Importing this package imports nothing else: the parent reads
``timing`` and ``trials`` without starting a worker.
"""
