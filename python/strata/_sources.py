"""Opening NetCDF-3/4 and HDF5 sources, and the stored type of their variables."""

from __future__ import annotations

import os

import numpy as np

from ._attrs import NUMERIC_TYPES
from .errors import CompatibilityError, CorruptionError, NotFoundError


def open_source(path: str):
    """A source file opened for reading raw values (no masking, scaling or char joining)."""
    import netCDF4

    if not os.path.exists(path):
        raise NotFoundError(f"no such file: '{path}'")
    from ._classic import check_length

    if os.path.isfile(path) and (why := check_length(path)):
        raise CorruptionError(f"'{path}': {why}")
    try:
        nc = netCDF4.Dataset(path, "r")
    except OSError as err:
        raise CompatibilityError(f"'{path}' is not a NetCDF or HDF5 file netCDF4 can read: {err}") from err
    nc.set_auto_maskandscale(False)
    nc.set_auto_chartostring(False)
    if nc.groups:
        names = ", ".join(nc.groups)
        nc.close()
        raise CompatibilityError(f"'{path}' has groups ({names}); strata imports flat datasets only for now")
    return nc


def source_dtype(var) -> str:
    """The stored type name of a source variable."""
    return strata_dtype(var.dtype, var.name)


def strata_dtype(dtype, name: str) -> str:
    """The stored type name for a NumPy dtype (``str`` means variable-length strings)."""
    if dtype is str or np.dtype(dtype).kind in "OU":
        return "string"
    dt = np.dtype(dtype)
    if dt.kind == "S" and dt.itemsize == 1:
        return "char"
    key = dt.str[1:]
    if dt.kind in "iuf" and key in NUMERIC_TYPES:
        return NUMERIC_TYPES[key]
    raise CompatibilityError(f"variable '{name}' has type {dt}, which strata cannot store yet")
