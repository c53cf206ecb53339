"""The export's one error type."""
from ..errors import UserError


class ExportError(UserError):
    """A candidate that cannot be exported, and why."""
