"""Deciding, in the trusted parent, from what workers sent back: ``correctness`` (outputs against
the reference), ``verdict`` (status, flags, VerifyResult and ProfileResult), ``quality`` (whether a
timing is good enough to act on), ``roofline`` and ``ceilings`` (the floor a task cannot beat),
``static`` (checks over the candidate's source before anything runs).
"""
