"""Starting workers and hearing back: ``isolation`` runs ``python -m kernelskill.evaluate.worker``
in its own process group, scratch directory and scrubbed environment (spares started ahead);
``lifeline`` makes every child die with its owner; ``reply`` is what a worker writes back.
"""
