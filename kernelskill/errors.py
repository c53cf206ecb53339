"""The one exception type meant for users: the CLI prints its message and exits 2."""


class UserError(Exception):
    """A mistake the user can fix (bad task file, bad flag, missing device).

    The message says what is wrong, where (file and line when known) and what to do. A command run
    with ``--json`` prints ``{"status": "error", "error": message}`` plus ``json_fields``.
    """
    json_fields: dict = {}       # set on an instance, never mutated here


class TaskError(UserError):
    """A task file or directory that cannot be loaded or run."""


class StochasticTask(TaskError):
    """A task whose reference differs from itself on the same inputs under the same seed: no
    candidate can be verified against it (the evaluator's ``stochastic`` verdict)."""


def tail(text: str, lines: int = 40, chars: int = 4000) -> str:
    """The last ``lines`` lines of a log, at most ``chars`` characters (what a result carries)."""
    return "\n".join(text.splitlines()[-lines:])[-chars:]


def one_line(text: str, limit: int = 300) -> str:
    """``text`` as one line of at most ``limit`` characters (for a log line or a tool's error: a
    message may quote a megabyte argument)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"
