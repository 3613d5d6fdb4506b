"""Export a store (one version) to a NetCDF-4 file: ``strata export STORE out.nc``.

Every dimension (unlimited ones stay unlimited), variable, value and attribute comes back
as imported: values bit for bit in their stored type (packed integers stay packed, NaNs
and fill values stay), attributes in their NetCDF types, ``char`` and string variables as
such. Data is written block by block along each variable's first dimension (about 64 MiB
at a time), so memory stays bounded whatever the store's size. The file is written under a
temporary name beside ``out`` and renamed when complete: a failed export leaves nothing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from . import _core
from ._slabs import boxes
from .dataset import Dataset, numpy_dtype
from .errors import InvalidArgumentError

BLOCK_BYTES = 64 << 20


@dataclass
class ExportReport:
    store: str
    out: str
    version: int
    variables: int
    raw_bytes: int
    seconds: float
    #: What the NetCDF library refused to write (an attribute it does not allow), if anything.
    warnings: list[str]


def _set_attr(target, name: str, value, kind: str) -> None:
    if kind == "strings":
        target.setncattr_string(name, list(value))
    else:
        target.setncattr(name, value)


def _place(nc, flat: str):
    """The group a path name lives in (made if needed) and its own name: ``ocean/temp`` is
    ``temp`` in group ``ocean`` (strata names a nested group's variables, dimensions and
    attributes by path)."""
    path, _, name = flat.rpartition("/")
    return (nc.createGroup(path) if path else nc), name


def _numpy_type(meta: _core.VariableInfo):
    t = meta.dtype
    if t == "string":
        return str
    if t == "char":
        return "S1"
    return numpy_dtype(t).newbyteorder("=")


def export_file(
    store: str | os.PathLike,
    out: str | os.PathLike,
    *,
    version: int | None = None,
    zlib: bool = True,
    complevel: int = 4,
    overwrite: bool = False,
    progress: bool = False,
) -> ExportReport:
    """Writes version ``version`` (the newest when None) of ``store`` to the NetCDF-4 file
    ``out``, compressed with zlib (shuffle, ``complevel``) in the store's chunk shapes unless
    ``zlib=False``. Refuses to replace an existing ``out`` unless ``overwrite``."""
    import netCDF4

    from .importer import _progress

    store, out = os.fspath(store), os.fspath(out)
    if zlib and not (isinstance(complevel, int) and 0 <= complevel <= 9):
        raise InvalidArgumentError(f"complevel is zlib's level, 0 to 9, not {complevel!r}")
    if os.path.exists(out) and not overwrite:
        raise InvalidArgumentError(f"'{out}' exists: choose another name, or overwrite it explicitly")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise InvalidArgumentError(f"cannot write '{out}': directory '{parent}' does not exist")
    t0 = time.perf_counter()
    ds = Dataset(store, version)
    schema = ds.schema
    tmp = os.path.join(parent, f".{os.path.basename(out)}.{os.getpid()}.tmp")
    raw = 0
    warnings: list[str] = []
    try:
        with netCDF4.Dataset(tmp, "w", format="NETCDF4") as nc:
            dims = {}
            for d in schema.dims:
                group, name = _place(nc, d.name)
                dims[d.name] = group.createDimension(name, None if d.unlimited else d.size)
            for a in schema.attrs:
                group, name = _place(nc, a.name)
                _set_attr(group, name, a.value, a.type_name)
            total = sum(int(np.prod(v.shape, dtype=np.int64)) * max(v.dtype.itemsize, 1) for v in ds.variables.values())
            with _progress(total, f"export {os.path.basename(out)}", progress) as bar:
                for meta in schema.variables:
                    raw += _write_variable(nc, dims, ds, meta, zlib, complevel, bar, warnings)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return ExportReport(store, out, ds.version, len(schema.variables), raw, time.perf_counter() - t0, warnings)


def _write_variable(
    nc, dims, ds, meta: _core.VariableInfo, zlib: bool, complevel: int, bar, warnings: list[str]
) -> int:
    name = meta.name
    var = ds[name]
    kwargs: dict = {"fill_value": False}  # no fill value the source did not have
    dtype = _numpy_type(meta)
    fill = var.attrs.get("_FillValue")
    # A _FillValue of the variable's own type is set when the variable is made (NetCDF's
    # rule); one of another type (files written around the NetCDF library have them) is
    # kept as an attribute if the library allows it, else reported.
    same_type = fill is not None and dtype is not str and np.asarray(fill).dtype == np.dtype(dtype)
    if same_type:
        kwargs["fill_value"] = fill
    if zlib and dtype is not str and meta.dims and meta.chunk is not None:
        sizes = [max(1, s) for s in var.shape]
        kwargs.update(zlib=True, complevel=complevel, shuffle=True)
        kwargs["chunksizes"] = [max(1, min(c, s)) for c, s in zip(meta.chunk, sizes, strict=True)]
    group, own = _place(nc, name)
    v = group.createVariable(own, dtype, tuple(dims[d] for d in meta.dims), **kwargs)
    v.set_auto_maskandscale(False)
    if hasattr(v, "set_auto_chartostring"):
        v.set_auto_chartostring(False)
    for a in meta.attrs:
        if a.name == "_FillValue" and same_type:
            continue
        try:
            _set_attr(v, a.name, a.value, a.type_name)
        except (RuntimeError, ValueError, TypeError, AttributeError) as e:
            warnings.append(f"{name}:{a.name} not written ({e})")
    if dtype is str:
        values = np.array(meta.inline_strings or [], dtype=object).reshape(var.shape)
        if values.size:
            v[...] = values
        return 0
    if var.size == 0:
        return 0
    if var.ndim == 0:
        v.assignValue(var[...])
        bar.update(var.dtype.itemsize)
        return var.dtype.itemsize
    # Whole chunks, about BLOCK_BYTES at a time: one member of a large ensemble is itself
    # too large to hold.
    chunk = list(meta.chunk or [1] * var.ndim)
    piece = _core.piece_shape(list(var.shape), chunk, var.dtype.itemsize, BLOCK_BYTES)
    for box in boxes(tuple(var.shape), piece):
        block = var[box]
        v[box] = block
        bar.update(block.nbytes)
        del block
    return var.size * var.dtype.itemsize
