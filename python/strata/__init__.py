"""strata: a storage and query engine for large scientific array data.

>>> import strata
>>> strata.import_file("run.nc", "run.strata")          # doctest: +SKIP
>>> ds = strata.open("run.strata")                      # doctest: +SKIP
>>> ds["sst"].sel(lat=slice(-10, 10), time=slice("2000-01", "2000-06"))  # doctest: +SKIP
"""

# _cpu comes first: importing it checks the CPU before anything loads the extension.
from . import _cpu, errors  # noqa: F401
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
from .export import ExportReport, export_file
from .importer import ImportReport, PlannedVariable, append_file, import_file, preview_import
from .in_place import IndexReport, index_file
from .query import parse_where, session
from .sql import SqlSession, sql
from .writer import Writer, write_arrays


def __getattr__(name: str):
    # strata.remote imports the HTTP client, and to_strata Dask, only when used (the
    # command line starts faster).
    import importlib

    if name in ("remote", "parallel", "netcdf"):
        return importlib.import_module(f".{name}", __name__)
    if name == "to_strata":
        module = importlib.import_module("._dask", __name__)
        module.register_accessor()
        return module.to_strata
    raise AttributeError(f"module 'strata' has no attribute '{name}'")


if "xarray" in __import__("sys").modules:  # ds.strata.to_store(...) where xarray is in use
    from ._dask import register_accessor as _register

    _register()


__all__ = [
    "FORMAT_VERSION",
    "AccessError",
    "CompatibilityError",
    "ConflictError",
    "CorruptionError",
    "Dataset",
    "ExportReport",
    "ImportReport",
    "IndexReport",
    "InvalidArgumentError",
    "LimitError",
    "NotFoundError",
    "PlannedVariable",
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
    "export_file",
    "import_file",
    "index_file",
    "open",
    "parse_where",
    "preview_import",
    "session",
    "sql",
    "to_strata",
    "write_arrays",
]
