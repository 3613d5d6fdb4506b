"""Exception hierarchy. Every error strata raises is a :class:`StrataError`; the subclasses
say what kind of failure it is, and also derive from the matching built-in exception so
generic handlers (``except ValueError``, ``except OSError``) keep working."""


class StrataError(Exception):
    """Base class of all strata errors."""


class CorruptionError(StrataError):
    """Stored bytes do not match the format or their checksums (truncated or damaged files)."""


class InvalidArgumentError(StrataError, ValueError):
    """The request is impossible: unknown variable, out-of-range selection, bad option."""


class CompatibilityError(StrataError):
    """Written by an incompatible format version, or data that does not fit the schema."""


class NotFoundError(StrataError, FileNotFoundError):
    """A store, version or file does not exist."""


class StrataIOError(StrataError, OSError):
    """Reading or writing storage failed."""


class ConflictError(StrataError):
    """Another writer committed first; this writer's changes were not published."""


class AccessError(StrataError, PermissionError):
    """A server refused the request: the dataset needs a token this request lacks."""


class LimitError(StrataError):
    """A server's limit was reached: result too large, too slow, or too many requests at once."""
