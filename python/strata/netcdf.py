"""netCDF4-python's writing and reading interface over strata stores, so that a program
written for netCDF4 writes a compressed, laid-out store by changing one import::

    from strata import netcdf as nc          # was: import netCDF4 as nc

    ds = nc.Dataset("run.strata", "w")
    ds.createDimension("time", None)
    ds.createDimension("lat", 90)
    temp = ds.createVariable("temp", "f4", ("time", "lat"), fill_value=-999.0)
    temp.units = "K"
    for t in range(10):
        temp[t, :] = step(t)
    ds.close()                                  # one version is committed here

Or run a netCDF4 program unchanged: ``python -m strata.netcdf program.py ARGS`` makes its
``import netCDF4`` this module.

How it differs from a NetCDF file, by design:

- Records (the unlimited dimension) are appended in order. A record is laid out and
  compressed once a later record of the same variable is written, so it cannot be changed
  after that; writing every variable step by step keeps memory bounded (a program that
  writes one variable whole before the next holds the earlier ones until the others catch up).
- Variables without the unlimited dimension are held in memory until :meth:`Dataset.close`.
- Everything is defined before the first value is written (netCDF classic's define mode).
- Compression arguments (``zlib``, ``complevel``, ``chunksizes``...) are accepted and left to
  strata: its layout file (``STRATA_CONFIG``, docs/writing.md) or options given as
  ``Dataset(path, "w", strata={"codec": "auto", "layout": "V-S"})`` decide.
- Nothing is visible to readers until ``close()`` commits; a program that dies leaves the
  store as it was. Mode ``"a"`` adds records to an existing store as a new version.
- Reading (mode ``"r"``) gives masked, scaled arrays as netCDF4 does; a path that is a NetCDF
  file rather than a store is opened with netCDF4 itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable
from typing import Any

import numpy as np

from . import _core
from .dataset import is_store
from .dataset import open as _open_store
from .errors import InvalidArgumentError
from .writer import Writer

# netCDF's default fill values (netcdf.h), which netCDF4-python exports under this name.
default_fillvals = {
    "S1": "\x00",
    "i1": -127,
    "u1": 255,
    "i2": -32767,
    "u2": 65535,
    "i4": -2147483647,
    "u4": 4294967295,
    "i8": -9223372036854775806,
    "u8": 18446744073709551614,
    "f4": 9.969209968386869e36,
    "f8": 9.969209968386869e36,
}

with contextlib.suppress(ImportError):  # time helpers netCDF4 re-exports from cftime
    from cftime import date2index, date2num, num2date  # noqa: F401

__version__ = _core.__version__


def _is_store(path: str) -> bool:
    return is_store(path)


def _type_key(dtype: np.dtype) -> str:
    return dtype.str[1:] if dtype.kind != "S" else "S1"


def _netcdf_file(path: str, mode: str, **kwargs):
    import netCDF4

    return netCDF4.Dataset(path, mode, **kwargs)


class Dimension:
    def __init__(self, ds: Dataset, name: str, size: int | None):
        self._ds, self.name, self._size = ds, name, size

    def isunlimited(self) -> bool:
        return self._size is None

    @property
    def size(self) -> int:
        return len(self)

    def __len__(self) -> int:
        return self._ds._record_count() if self._size is None else self._size

    def __repr__(self) -> str:
        kind = "unlimited" if self._size is None else "fixed"
        return f"<strata.netcdf.Dimension {kind} '{self.name}', size = {len(self)}>"


class _Attributes:
    """netCDF4's attribute calls, shared by datasets and variables."""

    _reserved: frozenset[str] = frozenset()

    def ncattrs(self) -> list[str]:
        return list(self._attrs)

    def getncattr(self, name: str):
        try:
            return self._attrs[name]
        except KeyError:
            raise AttributeError(f"no attribute '{name}'") from None

    def setncattr(self, name: str, value) -> None:
        self._ds._check_writable()
        self._attrs[name] = value
        self._ds._attribute_set(self._target, name, value)

    def setncatts(self, attrs: dict) -> None:
        for k, v in attrs.items():
            self.setncattr(k, v)

    def __setattr__(self, name: str, value) -> None:
        if name.startswith("_") or name in self._reserved:
            object.__setattr__(self, name, value)
        else:
            self.setncattr(name, value)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.getncattr(name)


class Variable(_Attributes):
    _reserved = frozenset({"name"})

    def __init__(self, ds: Dataset, name: str, dtype: np.dtype, dimensions: tuple[str, ...], attrs: dict):
        self._ds, self.name, self._dtype, self._dimensions = ds, name, dtype, dimensions
        self._attrs = dict(attrs)
        self._target = name
        self._mask = self._scale = True
        # Writing: values of non-record variables until close; records not yet appended.
        self._whole: np.ndarray | None = None
        self._records: dict[int, np.ndarray] = {}
        self._appended = 0

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def datatype(self) -> np.dtype:
        return self._dtype

    @property
    def dimensions(self) -> tuple[str, ...]:
        return self._dimensions

    @property
    def ndim(self) -> int:
        return len(self._dimensions)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(self._ds.dimensions[d]) for d in self._dimensions)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def __repr__(self) -> str:
        return f"<strata.netcdf.Variable {self._dtype} {self.name}{self._dimensions}, shape {self.shape}>"

    def set_auto_maskandscale(self, on: bool) -> None:
        self._mask = self._scale = bool(on)

    def set_auto_mask(self, on: bool) -> None:
        self._mask = bool(on)

    def set_auto_scale(self, on: bool) -> None:
        self._scale = bool(on)

    def set_always_mask(self, on: bool) -> None:
        pass

    def assignValue(self, value) -> None:
        """Sets a scalar variable's value (netCDF4's form of ``v[...] = value``)."""
        self[...] = value

    def getValue(self):
        """A scalar variable's value (netCDF4's form of ``v[...]``)."""
        return self[...]

    def chunking(self):
        return "contiguous"

    def filters(self) -> dict:
        return {}

    @property
    def _record(self) -> bool:
        return bool(self._dimensions) and self._dimensions[0] == self._ds._record_dim

    def _fill(self):
        if "_FillValue" in self._attrs:
            return np.asarray(self._attrs["_FillValue"]).astype(self._dtype)
        return np.asarray(default_fillvals.get(_type_key(self._dtype), 0)).astype(self._dtype)

    # -- reading -------------------------------------------------------------------------

    def __getitem__(self, key):
        if self._ds._mode == "w" and not self._record:
            whole = self._whole if self._whole is not None else np.full(self.shape, self._fill())
            return self._decode(np.asarray(whole[key]))
        if self._ds._mode == "w" or (self._ds._writer is not None and self._record):
            raise InvalidArgumentError(f"'{self.name}': records written are read back after close()")
        raw = self._ds._store[self.name][key]
        return self._decode(np.asarray(raw))

    def _decode(self, raw: np.ndarray):
        out: Any = raw
        if self._mask and raw.dtype.kind in "iuf":
            bad = np.zeros(raw.shape, dtype=bool)
            fill = self._attrs.get("_FillValue")
            if fill is None and raw.dtype.itemsize > 1:
                fill = default_fillvals.get(_type_key(raw.dtype))
            for value in (fill, self._attrs.get("missing_value")):
                if value is not None:
                    for v in np.atleast_1d(np.asarray(value, dtype=raw.dtype)):
                        bad |= np.isnan(raw) if np.isnan(v) else raw == v
            lo, hi = self._attrs.get("valid_min"), self._attrs.get("valid_max")
            if "valid_range" in self._attrs:
                lo, hi = self._attrs["valid_range"]
            if lo is not None:
                bad |= raw < np.asarray(lo, dtype=raw.dtype)
            if hi is not None:
                bad |= raw > np.asarray(hi, dtype=raw.dtype)
            out = np.ma.masked_array(raw, mask=bad)
        if self._scale and ("scale_factor" in self._attrs or "add_offset" in self._attrs):
            scale = np.asarray(self._attrs.get("scale_factor", 1.0))
            offset = np.asarray(self._attrs.get("add_offset", 0.0))
            out = out * scale + offset
        return out

    # -- writing -------------------------------------------------------------------------

    def _encode(self, value) -> np.ndarray:
        """Masked values to the fill value and packing, as netCDF4 writes them."""
        data = value
        if self._scale and ("scale_factor" in self._attrs or "add_offset" in self._attrs):
            data = (np.ma.asarray(data) - self._attrs.get("add_offset", 0.0)) / self._attrs.get("scale_factor", 1.0)
            if self._dtype.kind in "iu":
                data = np.ma.round(data)
        if np.ma.isMaskedArray(data):
            data = np.ma.filled(data.astype(self._dtype), self._fill())
        arr = np.asarray(data)
        if self._dtype.kind == "S":
            return arr.astype("S1")
        return arr.astype(self._dtype)

    def __setitem__(self, key, value) -> None:
        ds = self._ds
        ds._check_writable()
        ds._ensure_writer()
        data = self._encode(value)
        if not self._record:
            if ds._mode != "w":
                raise InvalidArgumentError(
                    f"'{self.name}' has no unlimited dimension: a store's fixed variables "
                    "are written when it is made (mode 'w')"
                )
            if self._whole is None:
                self._whole = np.full(self.shape, self._fill(), dtype=self._dtype)
            self._whole[key] = data
            return
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in key):
            i = next(i for i, k in enumerate(key) if k is Ellipsis)
            key = key[:i] + (slice(None),) * (self.ndim - len(key) + 1) + key[i + 1 :]
        key = key + (slice(None),) * (self.ndim - len(key))
        head, inner = key[0], key[1:]
        inner_shape = tuple(len(ds.dimensions[d]) for d in self._dimensions[1:])
        # The shape `inner` selects, from a view that holds no memory.
        picked = np.broadcast_to(np.empty((), dtype=np.uint8), inner_shape)[inner].shape
        if isinstance(head, slice):
            start = head.start or 0
            step = head.step or 1
            if head.stop is not None:
                stop = head.stop
            elif data.ndim and data.ndim == len(picked) + 1:
                stop = start + data.shape[0] * step
            else:
                stop = max(len(self), start + 1)
            records = list(range(start, stop, step))
            if step < 1 or start < 0:
                raise InvalidArgumentError(f"'{self.name}': records are written forwards, with a step of at least 1")
            values = np.broadcast_to(data, (len(records), *picked))
        else:
            records = [int(head)]
            if records[0] < 0:
                records[0] += len(self)
            values = np.broadcast_to(data, picked)[np.newaxis]
        if records and records[0] < self._appended:
            raise InvalidArgumentError(
                f"'{self.name}': record {records[0]} was already written and compressed; strata appends records "
                "in order (each record can be changed until a later one is written)"
            )
        for r, v in zip(records, values, strict=True):
            buf = self._records.get(r)
            if buf is None:
                buf = self._records[r] = np.full(inner_shape, self._fill(), dtype=self._dtype)
            buf[inner] = v
        ds._records_seen = max(ds._records_seen, records[-1] + 1 if records else 0)
        if records:
            self._flush(below=records[-1])

    def _flush(self, below: int) -> None:
        """Appends every record before ``below`` (missing ones as the fill value)."""
        if below <= self._appended:
            return
        inner = tuple(len(self._ds.dimensions[d]) for d in self._dimensions[1:])
        block = np.empty((below - self._appended, *inner), dtype=self._dtype)
        for i, r in enumerate(range(self._appended, below)):
            rec = self._records.pop(r, None)
            block[i] = self._fill() if rec is None else rec
        self._ds._writer.append({self.name: block})
        self._appended = below


class Dataset(_Attributes):
    """A store opened as netCDF4.Dataset would open a file: mode ``"r"``, ``"w"`` (a new
    store; ``clobber`` replaces an existing store, never other files) or ``"a"``/``"r+"``
    (new records on an existing store)."""

    _reserved = frozenset({"dimensions", "variables"})

    def __new__(cls, filename, mode: str = "r", *args, **kwargs):
        path = os.fspath(filename)
        if mode == "r" and not _is_store(path) and os.path.isfile(path):
            return _netcdf_file(path, mode, *args, **kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        filename,
        mode: str = "r",
        clobber: bool = True,
        format: str = "NETCDF4",
        diskless: bool = False,
        persist: bool = False,
        keepweakref: bool = False,
        memory=None,
        encoding=None,
        parallel: bool = False,
        comm=None,
        info=None,
        strata: dict | None = None,
        **kwargs,
    ):
        path = os.fspath(filename)
        self._path, self._mode = path, {"r+": "a"}.get(mode, mode)
        self._ds, self._target = self, None
        self._store = None
        self._writer: Writer | None = None
        self._options = dict(strata or {})
        self._record_dim: str | None = None
        self._records_seen = 0
        self._closed = False
        self.dimensions: dict[str, Dimension] = {}
        self.variables: dict[str, Variable] = {}
        self._attrs: dict[str, Any] = {}
        if parallel:
            raise InvalidArgumentError(
                "strata.netcdf has no parallel mode: MPI ranks write one store with strata.parallel.ParallelWriter "
                "(docs/writing.md, 'Parallel writers')"
            )
        if diskless or memory is not None:
            raise InvalidArgumentError("strata.netcdf writes stores on disk (no diskless or memory mode)")
        if self._mode not in ("r", "w", "a"):
            raise InvalidArgumentError(f"mode must be 'r', 'w', 'a' or 'r+', not '{mode}'")
        if self._mode == "w":
            if _is_store(path):
                if not clobber:
                    raise InvalidArgumentError(f"'{path}' exists (clobber=False)")
                shutil.rmtree(path)
            return
        self._store = _open_store(path)
        self._attrs = dict(self._store.attrs)
        self._record_dim = self._store.record_dim
        for name, size in self._store.dims.items():
            self.dimensions[name] = Dimension(self, name, None if name == self._record_dim else size)
        for name, v in self._store.variables.items():
            var = Variable(self, name, v.dtype if v.dtype != np.dtype("O") else np.dtype(str), v.dims, v.attrs)
            var._appended = self._store.dims.get(self._record_dim, 0) if var._record else 0
            self.variables[name] = var
        self._records_seen = self._store.dims.get(self._record_dim, 0) if self._record_dim else 0

    # -- what netCDF4 offers ---------------------------------------------------------------

    @property
    def file_format(self) -> str:
        return "STRATA"

    data_model = file_format

    @property
    def filepath(self):
        return lambda: self._path

    @property
    def groups(self) -> dict:
        return {}

    @property
    def isopen(self):
        return lambda: not self._closed

    def __getitem__(self, name: str) -> Variable:
        """The variable ``name`` (``ds["sst"]``, as netCDF4 allows; a store has no groups)."""
        try:
            return self.variables[name]
        except KeyError:
            raise IndexError(f"{name} not found in /") from None

    def set_auto_maskandscale(self, on: bool) -> None:
        for v in self.variables.values():
            v.set_auto_maskandscale(on)

    def set_auto_mask(self, on: bool) -> None:
        for v in self.variables.values():
            v.set_auto_mask(on)

    def set_auto_scale(self, on: bool) -> None:
        for v in self.variables.values():
            v.set_auto_scale(on)

    def set_always_mask(self, on: bool) -> None:
        pass

    def set_fill_on(self) -> None:
        pass

    def set_fill_off(self) -> None:
        pass

    def sync(self) -> None:
        pass

    def createDimension(self, dimname: str, size: int | None = None) -> Dimension:
        self._check_defining(f"dimension '{dimname}'")
        if dimname in self.dimensions:
            raise InvalidArgumentError(f"dimension '{dimname}' is already defined")
        if size is None or size == 0:
            if self._record_dim is not None:
                raise InvalidArgumentError(
                    f"'{dimname}' would be a second unlimited dimension ('{self._record_dim}' is one); a strata "
                    "store has at most one"
                )
            self._record_dim, size = dimname, None
        self.dimensions[dimname] = Dimension(self, dimname, None if size is None else int(size))
        return self.dimensions[dimname]

    def createVariable(
        self, varname: str, datatype, dimensions: Iterable[str] | str = (), *args, fill_value=None, **kwargs
    ) -> Variable:
        self._check_defining(f"variable '{varname}'")
        if varname in self.variables:
            raise InvalidArgumentError(f"variable '{varname}' is already defined")
        dims = (dimensions,) if isinstance(dimensions, str) else tuple(dimensions)
        for d in dims:
            if d not in self.dimensions:
                raise InvalidArgumentError(f"variable '{varname}' names dimension '{d}', which is not defined")
        if datatype is str or np.dtype(datatype).kind in "OU":
            raise InvalidArgumentError(f"'{varname}': variable-length strings are not written through strata.netcdf")
        dtype = np.dtype(datatype)
        dtype = np.dtype("S1") if dtype.kind == "S" else dtype.newbyteorder("=")
        attrs = {}
        if fill_value is not None and fill_value is not False:
            attrs["_FillValue"] = np.asarray(fill_value).astype(dtype)[()]
        var = Variable(self, varname, dtype, dims, attrs)
        if fill_value is False:
            var._attrs.pop("_FillValue", None)
        self.variables[varname] = var
        return var

    def renameVariable(self, *_):
        raise InvalidArgumentError("a strata store's variables keep their names")

    def __enter__(self) -> Dataset:
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.close()
        else:
            self._closed = True  # commit nothing

    def __repr__(self) -> str:
        return f"<strata.netcdf.Dataset '{self._path}' mode '{self._mode}', {len(self.variables)} variables>"

    def close(self) -> None:
        """Commits what was written as a new version (mode ``"w"`` or ``"a"``)."""
        if self._closed:
            return
        self._closed = True
        if self._mode == "r":
            return
        self._ensure_writer()
        total = self._record_count()
        for v in self.variables.values():
            if v._record:
                v._flush(below=total)
        if self._mode == "w":
            for v in self.variables.values():
                if not v._record:
                    self._writer.write(v.name, v._whole if v._whole is not None else np.full(v.shape, v._fill()))
        self._writer.commit(f"strata.netcdf ({os.path.basename(self._path)})")

    # -- inside ----------------------------------------------------------------------------

    def _record_count(self) -> int:
        return self._records_seen

    def _check_writable(self) -> None:
        if self._closed:
            raise InvalidArgumentError("the dataset is closed")
        if self._mode == "r":
            raise InvalidArgumentError("the dataset is open for reading (mode 'r')")

    def _check_defining(self, what: str) -> None:
        self._check_writable()
        if self._mode != "w":
            raise InvalidArgumentError(f"cannot define {what}: an existing store keeps its variables")
        if self._writer is not None:
            raise InvalidArgumentError(
                f"cannot define {what} after the first value was written: define everything first, as in "
                "netCDF classic's define mode"
            )

    def _attribute_set(self, target: str | None, name: str, value) -> None:
        if self._mode == "a":
            self._ensure_writer()
        if self._writer is not None:
            self._writer.set_attrs(target, **{name: value})

    def _ensure_writer(self) -> None:
        if self._writer is not None:
            return
        if self._mode == "a":
            self._writer = Writer.append_to(self._path, message="strata.netcdf")
        else:
            self._writer = Writer.create(
                self._path,
                dims={name: d._size for name, d in self.dimensions.items()},
                variables={name: (v._dtype, v._dimensions, v._attrs) for name, v in self.variables.items()},
                attrs=self._attrs,
                **self._options,
            )
        # Programs may write a variable whole before the next: let it wait in memory.
        self._writer._w.allow_ahead(None)


def _main(argv: list[str]) -> int:
    """``python -m strata.netcdf program.py ARGS``: runs a netCDF4 program on strata."""
    import runpy
    import sys

    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[0])
        print(
            "\nusage: python -m strata.netcdf PROGRAM.py [ARGS...]\n"
            "Runs PROGRAM with `import netCDF4` giving strata.netcdf: it writes strata stores where it "
            "wrote NetCDF files."
        )
        return 0 if argv else 2
    import strata.netcdf as shim

    sys.modules["netCDF4"] = shim
    sys.argv = list(argv)
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(_main(sys.argv[1:]))
