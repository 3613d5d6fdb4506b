"""Index a NetCDF-4/HDF5 file in place: ``strata index FILE.nc``.

The index is a store beside the file (``FILE.nc.strata`` by default) that holds no data:
its segments are the file's own chunks, read where they lie. It records every chunk's
place, checksum and value summary, so the file answers region and value queries, SQL and
the server's requests like a store, without a copy. The file is never written; a file
changed after indexing is detected (size, then each chunk's checksum) and refused.

HDF5's metadata (chunk places, filters) is read with h5py; the engine reads every chunk
once, decodes it with its own deflate/shuffle/zstd decoders and summarises it. What cannot
be read in place (other HDF5 filters, compact storage, NetCDF-3 files) is refused
with :class:`CompatibilityError`; ``strata import`` copies such files into a store.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from . import _core
from ._sources import open_source
from .errors import CompatibilityError, InvalidArgumentError, NotFoundError
from .importer import _progress, source_schema

# HDF5 filter ids strata decodes, by the names the engine's `hdf5` codec takes.
_FILTERS = {1: "deflate", 2: "shuffle", 3: "fletcher32", 32015: "zstd"}
# Others a file may use, named in the refusal.
_FILTER_NAMES = {
    4: "szip",
    5: "nbit",
    6: "scaleoffset",
    307: "bzip2",
    32000: "lzf",
    32001: "blosc",
    32004: "lz4",
    32008: "bitshuffle",
}


@dataclass
class IndexReport:
    """What ``index_file`` did: the index, its version, and the figures."""

    source: str
    index: str
    version: int
    variables: int
    chunks: int
    bytes_read: int
    raw_bytes: int
    index_bytes: int
    seconds: float


def default_index_path(source: str | os.PathLike) -> str:
    """Where ``strata index FILE`` puts the index of ``FILE``: ``FILE.strata`` beside it."""
    return os.fspath(source) + ".strata"


def _storage(name: str, dset) -> dict:
    """How the bytes of HDF5 dataset ``dset`` lie in its file, for the engine."""
    import h5py

    plist = dset.id.get_create_plist()
    layout = plist.get_layout()
    order = dset.dtype.byteorder
    big = order == ">" or (order == "=" and sys.byteorder == "big")
    if layout == h5py.h5d.CONTIGUOUS:
        return {"kind": "contiguous", "offset": dset.id.get_offset(), "big_endian": big}
    if layout != h5py.h5d.CHUNKED:
        raise CompatibilityError(
            f"'{name}' is stored in HDF5's compact layout, which cannot be read in place: "
            "import the file (strata import) instead"
        )
    filters = []
    for i in range(plist.get_nfilters()):
        code = plist.get_filter(i)[0]
        if code not in _FILTERS:
            label = _FILTER_NAMES.get(code, f"filter {code}")
            raise CompatibilityError(
                f"'{name}' is compressed with HDF5's {label} filter, which strata cannot read in place "
                f"(it reads {', '.join(_FILTERS.values())}): import the file (strata import) instead"
            )
        filters.append(_FILTERS[code])
    chunks: list[dict] = []

    def visit(info):
        chunks.append(
            {
                "origin": [int(x) for x in info.chunk_offset],
                "offset": int(info.byte_offset),
                "length": int(info.size),
                "filter_mask": int(info.filter_mask),
            }
        )

    try:
        dset.id.chunk_iter(visit)
    except (AttributeError, NotImplementedError):  # HDF5 older than 1.12.3
        for i in range(dset.id.get_num_chunks()):
            visit(dset.id.get_chunk_info(i))
    return {
        "kind": "chunked",
        "chunk": [int(c) for c in dset.chunks],
        "filters": filters,
        "big_endian": big,
        "chunks": chunks,
    }


def _fill(dset) -> list[int] | None:
    """One element of the dataset's fill value, little-endian (None: HDF5's default, zero)."""
    value = dset.fillvalue
    if value is None:
        return None
    le = np.dtype(dset.dtype).newbyteorder("<")
    return list(np.array(value, dtype=dset.dtype).astype(le).tobytes())


def index_file(
    source: str | os.PathLike,
    index: str | os.PathLike | None = None,
    *,
    record_dim: str | None = None,
    bins: int = 0,
    binning: str | None = None,
    progress: bool = False,
) -> IndexReport:
    """Indexes the NetCDF-4/HDF5 file ``source`` in place, into ``index`` (a new or empty
    directory beside the file; default ``SOURCE.strata``). Indexing a file that has an index
    already makes a new version of it (after the file changed, for example).

    By default the index keeps a summary per chunk (count, minimum, maximum): a value
    query reads only chunks whose range straddles its bound. ``binning`` (comma-separated
    boundaries, ``equal-frequency`` or ``equal-width`` with ``bins`` bins) adds value bins:
    per chunk, each bin's summary and the positions of its elements, so a query whose bounds
    are boundaries (``TEMP >= 25`` with 25 a boundary) is answered from the index without
    reading the file. Bins cost a second read of the file when indexing and index space
    (about 2 MB for ERSST's 44 MB with 7 boundaries).

    Open the index like any store (``strata.open(index)``); ``strata serve`` serves it
    beside stores."""
    try:
        import h5py
    except ImportError as err:
        raise CompatibilityError(
            "strata index reads HDF5's chunk places with h5py: pip install 'strata[index]'"
        ) from err

    source = os.fspath(source)
    index = os.fspath(index) if index is not None else default_index_path(source)
    if not os.path.isfile(source):
        raise NotFoundError(f"no such file: '{source}'")
    src_dir = os.path.dirname(os.path.abspath(source))
    if os.path.dirname(os.path.abspath(index)) != src_dir:
        raise InvalidArgumentError(
            f"the index '{index}' must be beside '{source}' (in the same directory): it names the file by its name"
        )
    if not h5py.is_hdf5(source):
        raise CompatibilityError(
            f"'{source}' is not a NetCDF-4/HDF5 file: only those are indexed in place (strata import copies "
            "NetCDF-3 files into a store)"
        )
    t0 = time.perf_counter()
    nc = open_source(source)
    try:
        _, schema = source_schema(nc, source, record_dim)
        numeric = [v for v in schema["variables"] if v["dtype"] != "string"]
        shapes = {v["name"]: tuple(nc.variables[v["name"]].shape) for v in numeric}
    finally:
        nc.close()
    with h5py.File(source, "r") as h5:
        storages = []
        for v in numeric:
            dset = h5[v["name"]]
            if tuple(dset.shape) != shapes[v["name"]] and dset.chunks is None:
                raise CompatibilityError(f"'{v['name']}' has shape {dset.shape} in HDF5 and {shapes[v['name']]}")
            storages.append({"name": v["name"], "storage": _storage(v["name"], dset), "fill": _fill(dset)})
    indexer = _core.Indexer(index, os.path.basename(source), json.dumps(schema), bins, binning)
    chunks = read = raw = 0
    passes = 2 if bins or binning else 1
    with _progress(passes * os.path.getsize(source), f"index {os.path.basename(source)}", progress) as bar:
        for s in storages:
            n, got, r = indexer.add(json.dumps(s))
            chunks, read, raw = chunks + n, read + got, raw + r
            bar.update(got)
    version = indexer.commit(f"index {os.path.basename(source)}")
    index_bytes = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(index) for f in files)
    return IndexReport(
        source=source,
        index=index,
        version=version,
        variables=len(schema["variables"]),
        chunks=chunks,
        bytes_read=read,
        raw_bytes=raw,
        index_bytes=index_bytes,
        seconds=time.perf_counter() - t0,
    )
