"""strata: a storage and query engine for large scientific array data.

>>> import strata
>>> strata.import_file("run.nc", "run.strata")          # doctest: +SKIP
>>> ds = strata.open("run.strata")                      # doctest: +SKIP
>>> ds["sst"].sel(lat=slice(-10, 10), time=slice("2000-01", "2000-06"))  # doctest: +SKIP
"""

from . import errors
from ._core import FORMAT_VERSION, __version__
from .analyze import VariableAnalysis, analyze
from .dataset import Dataset, Variable, open
from .errors import (
    AccessError,
    CompatibilityError,
    ConflictError,
    CorruptionError,
    InvalidArgumentError,
    LimitError,
    NotFoundError,
    StrataError,
    StrataIOError,
)
from .importer import ImportReport, append_file, import_file
from .query import parse_where, session
from .sql import SqlSession, sql
from .writer import Writer, write_arrays


def __getattr__(name: str):
    # strata.remote imports the HTTP client only when used (the command line starts faster).
    if name == "remote":
        import importlib

        return importlib.import_module(".remote", __name__)
    raise AttributeError(f"module 'strata' has no attribute '{name}'")


__all__ = [
    "FORMAT_VERSION",
    "AccessError",
    "CompatibilityError",
    "ConflictError",
    "CorruptionError",
    "Dataset",
    "ImportReport",
    "InvalidArgumentError",
    "LimitError",
    "NotFoundError",
    "SqlSession",
    "StrataError",
    "StrataIOError",
    "Variable",
    "VariableAnalysis",
    "Writer",
    "__version__",
    "analyze",
    "append_file",
    "errors",
    "import_file",
    "open",
    "parse_where",
    "session",
    "sql",
    "write_arrays",
]
