"""Opening NetCDF-3/4 and HDF5 sources, and the stored type of their variables."""

from __future__ import annotations

import os

import numpy as np

from ._attrs import NUMERIC_TYPES
from .errors import CompatibilityError, CorruptionError, NotFoundError

# Files up to this size are opened from a read-only map of the file. Opened by its path, a
# file is first read by netCDF-C through a new 4 MiB buffer to check its 8-byte magic
# number (netcdf-c's NC_readfileF): up to 4 MiB read and that buffer's pages faulted in,
# 0.5-5 ms of a 5-30 ms import of a small file. A map costs ~0.1 ms, and its pages are the
# page cache's (bench/results/import_ab.md: a median 1.02x as fast over bench_import's 34
# fields, 2 MB CTH fields 0.94-1.13x, CanESM5's sea ice 1.16x; inside the VM's noise).
# Its pages count in the process's resident size as they are read, so a larger file is
# opened by its path, and held a slab at a time. (A file truncated while it is mapped
# would stop the process with SIGBUS, as with any mapped file: a source must not shrink
# while it is imported.)
MAP_AT_MOST = 16 << 20


def open_source(path: str):
    """A source file opened for reading raw values (no masking, scaling or char joining)."""
    import netCDF4

    if not os.path.exists(path):
        raise NotFoundError(f"no such file: '{path}'")
    image = None
    if os.path.isfile(path):
        image, why = _read_head(path)
        if why:
            raise CorruptionError(f"'{path}': {why}")
    try:
        # netCDF4 holds the map's buffer until the file is closed.
        nc = netCDF4.Dataset(path, "r") if image is None else netCDF4.Dataset(path, "r", memory=image)
    except OSError as err:
        # netCDF4 keeps the buffer of a file it failed to open: such a map stays. Files
        # that do not look like NetCDF or HDF5, or are truncated, are refused before it.
        raise CompatibilityError(f"'{path}' is not a NetCDF or HDF5 file netCDF4 can read: {err}") from err
    nc.set_auto_maskandscale(False)
    nc.set_auto_chartostring(False)
    return FlatGroups(nc) if nc.groups else nc


def _read_head(path: str):
    """The file at ``path``, opened once: a read-only map of it when it holds 1 to
    ``MAP_AT_MOST`` bytes, starts as a file netCDF4 reads and can be mapped, else None (it
    is opened by its path); and why it is a truncated NetCDF classic or HDF5 file, else
    None. Checked before netCDF4 reads it, which returns garbage for a classic file's
    missing bytes and says only "HDF error" of an HDF5 file's."""
    import mmap

    from . import _superblock
    from ._classic import HEADER_READ, is_classic, truncation

    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        classic = is_classic(head)
        head += f.read((HEADER_READ if classic else _superblock.HEAD_BYTES) - len(head))
        why = truncation(head, size) or _superblock.truncation(head, size)
        # Only a file that looks like one netCDF4 reads is mapped (see open_source).
        readable = classic or head[:8] == _superblock.SIGNATURE
        if why or not readable or not 0 < size <= MAP_AT_MOST:
            return None, why
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), None
        except (OSError, ValueError):
            return None, None  # a file system that cannot map files: opened by its path


def _path(group) -> str:
    """A group's path without the leading '/' ('' for the root group)."""
    return group.path.strip("/")


def _flat(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


class _FlatVariable:
    """A variable of a nested group under its path name (``ocean/temp``), its dimensions
    named by the paths of the groups that define them."""

    def __init__(self, var, name: str):
        self._var = var
        self.name = name
        self.dimensions = tuple(_flat(_path(d.group()), d.name) for d in var.get_dims())

    def __getattr__(self, attr):
        return getattr(self._var, attr)

    def __getitem__(self, key):
        return self._var[key]

    def __len__(self) -> int:
        return len(self._var)


class FlatGroups:
    """A NetCDF-4 file with groups seen as one flat dataset: variables and dimensions of a
    nested group are named by their path (``ocean/temp``, ``ocean/depth``), a group's
    attributes are global attributes named by path (``ocean/title``). NetCDF names cannot
    hold '/', so the names are unambiguous, and ``strata export`` makes the groups again."""

    def __init__(self, nc):
        self._nc = nc
        self.dimensions: dict = {}
        self.variables: dict = {}
        self._attrs: dict = {}
        self.groups: dict = {}
        self._walk(nc)

    def _walk(self, group) -> None:
        prefix = _path(group)
        for name, d in group.dimensions.items():
            self.dimensions[_flat(prefix, name)] = d
        for name, v in group.variables.items():
            flat = _flat(prefix, name)
            self.variables[flat] = _FlatVariable(v, flat) if prefix else v
        for a in group.ncattrs():
            self._attrs[_flat(prefix, a)] = group.getncattr(a)
        for sub in group.groups.values():
            sub.set_auto_maskandscale(False)
            sub.set_auto_chartostring(False)
            self._walk(sub)

    def ncattrs(self) -> list[str]:
        return list(self._attrs)

    def getncattr(self, name: str):
        return self._attrs[name]

    def close(self) -> None:
        self._nc.close()


def source_dtype(var) -> str:
    """The stored type name of a source variable. NetCDF-4's user-defined types are refused
    by name: strata stores numbers, characters and strings, and an enum stored as its
    integers would lose its names (and not export back as an enum)."""
    import netCDF4

    kind = getattr(var, "datatype", None)
    user = {netCDF4.CompoundType: "compound", netCDF4.EnumType: "enum", netCDF4.VLType: "variable-length"}
    for cls, label in user.items():
        # NetCDF-4 strings are variable-length too: those strata stores.
        if isinstance(kind, cls) and not (label == "variable-length" and kind.dtype is str):
            detail = ""
            if label == "compound":
                detail = f" (fields {', '.join(kind.dtype.names or ())})"
            elif label == "enum":
                detail = f" ({', '.join(kind.enum_dict)})"
            raise CompatibilityError(
                f"variable '{var.name}' has the {label} type '{kind.name}'{detail}, which strata cannot store: "
                "only numbers, characters and strings"
            )
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
