"""strata: a storage and query engine for large scientific array data.

>>> import strata
>>> strata.import_file("run.nc", "run.strata")          # doctest: +SKIP
>>> ds = strata.open("run.strata")                      # doctest: +SKIP
>>> ds["sst"].sel(lat=slice(-10, 10), time=slice("2000-01", "2000-06"))  # doctest: +SKIP
"""

# _cpu comes first: importing it checks the CPU before anything loads the extension.
from . import _cpu, errors  # noqa: F401
from ._core import FORMAT_VERSION, __version__

# `analyze` and `sql` are functions named after their modules: bound here, before anything
# else imports those modules (which would bind the module instead). Both modules load
# NumPy only when used.
from .analyze import VariableAnalysis, analyze
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
from .sql import SqlSession, sql

# The rest of the API loads on first use (PEP 562): the command line starts without
# NumPy's and the importer's import time unless its command needs them.
_LAZY = {
    "Dataset": "dataset",
    "Variable": "dataset",
    "open": "dataset",
    "ExportReport": "export",
    "export_file": "export",
    "ImportReport": "importer",
    "PlannedVariable": "importer",
    "append_file": "importer",
    "import_file": "importer",
    "preview_import": "importer",
    "IndexReport": "in_place",
    "index_file": "in_place",
    "parse_where": "query",
    "session": "query",
    "Writer": "writer",
    "write_arrays": "writer",
}


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    # strata.remote imports the HTTP client, and to_strata Dask, only when used.
    if name in ("remote", "parallel", "netcdf"):
        return importlib.import_module(f".{name}", __name__)
    if name == "to_strata":
        module = importlib.import_module("._dask", __name__)
        module.register_accessor()
        return module.to_strata
    raise AttributeError(f"module 'strata' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
