"""Arrays into the Rust writer: byte order, slabs of records, and the writer's options.
Shared by the importer and ``write_arrays``."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from ._attrs import NUMERIC_TYPES
from .errors import InvalidArgumentError

# The NumPy type of each stored type name ("f32" -> little-endian float32).
_STORED = {stored: np.dtype("<" + key) for key, stored in NUMERIC_TYPES.items()}


def le_bytes(arr: np.ndarray, dtype: str) -> np.ndarray:
    """The array as flat little-endian bytes of the stored type ``dtype`` (what segments
    hold). Values of another type of the same kind are converted: xarray's lazily encoded
    variables declare their file's float32 and compute float64, whose bytes read as float32
    were twice the records."""
    arr = np.asarray(arr)
    if dtype == "char":
        arr = arr.astype("S1")
    elif dtype in _STORED and arr.dtype != _STORED[dtype]:
        if not np.can_cast(arr.dtype, _STORED[dtype], casting="same_kind"):
            raise InvalidArgumentError(f"values of type {arr.dtype} cannot be stored as {dtype}")
        arr = arr.astype(_STORED[dtype])
    else:
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint8)


def write_record_slabs(writer, sources: dict[str, tuple[Any, str]], total: int, bar=None) -> int:
    """Streams records ``[0, total)`` of every record variable into new slabs, one slab of
    one variable in memory at a time. ``sources`` maps a name to (anything sliceable along
    the record dimension: a NetCDF variable or an array, stored type). Returns ``total``."""
    slab = writer.slab_records()
    for r0 in range(0, total, slab):
        n = min(slab, total - r0)
        writer.begin_slab(n)
        for name, (source, dtype) in sources.items():
            data = le_bytes(source[r0 : r0 + n], dtype)
            writer.put_records(name, data)
            if bar is not None:
                bar.update(data.nbytes)
        writer.finish_slab()
    return total


def boxes(shape: tuple[int, ...], piece) -> Iterator[tuple[slice, ...]]:
    """The blocks of ``piece``'s shape (``_core.piece_shape``) that tile an array of
    ``shape``, in C order, as slices (edge blocks cut short)."""
    for corner in itertools.product(*(range(0, n, p) for n, p in zip(shape, piece, strict=True))):
        yield tuple(slice(c, min(c + p, n)) for c, p, n in zip(corner, piece, shape, strict=True))


def write_static(writer, name: str, source: Any, dtype: str, bar=None) -> None:
    """Writes a variable without the record dimension: whole when small, else block by
    block (``Writer.static_piece``: whole chunks, about a slab each), so that memory holds
    one block of it, as a record variable's slab. ``source`` is anything sliceable: a NetCDF
    variable or an array."""
    shape = tuple(int(n) for n in source.shape)
    piece = tuple(writer.static_piece(name))
    if not piece or piece == shape or 0 in shape:
        data = le_bytes(source[...], dtype)
        writer.put_static(name, data)
        if bar is not None:
            bar.update(data.nbytes)
        return
    for box in boxes(shape, piece):
        data = le_bytes(source[box], dtype)
        writer.put_static_block(name, [b.start for b in box], [b.stop - b.start for b in box], data)
        if bar is not None:
            bar.update(data.nbytes)
        del data  # before the next block is read: one block in memory


def parse_dims(spec: dict[str, int] | str | None) -> dict[str, int]:
    if spec is None:
        return {}
    if isinstance(spec, dict):
        return {str(k): int(v) for k, v in spec.items()}
    out = {}
    for part in spec.split(","):
        if not part.strip():
            continue
        name, _, value = part.partition("=")
        try:
            out[name.strip()] = int(value)
        except ValueError:
            raise InvalidArgumentError(f"bad chunk spec '{part}': expected DIM=LENGTH") from None
    return out


# The keyword arguments of `writer_options`, which every writer takes and passes on.
LAYOUT_ARGS = ("chunks", "subchunks", "shape_rule", "slab_records", "layout", "byte_groups", "bins", "binning")


def writer_options(
    codec=None,
    *,
    objective=None,
    error_bound=None,
    chunks=None,
    subchunks=None,
    shape_rule=None,
    slab_records=None,
    layout=None,
    byte_groups=None,
    bins=None,
    binning=None,
) -> dict:
    """The Rust writer's options (``WriterOptions``) from the Python-side arguments; the
    engine checks them (an unknown ``shape_rule`` is refused there, with the rules it knows).
    ``codec="auto"`` asks the engine to plan for ``objective`` (default balanced) within
    ``error_bound``; a bound with an explicit chain is refused, not ignored."""
    auto = codec == "auto"
    if error_bound is not None and not auto:
        raise InvalidArgumentError("error_bound needs codec='auto' (or give a lossy chain such as 'sz:abs=0.01')")
    options = {
        "codec": None if auto else codec,
        "chunks": parse_dims(chunks),
        "subchunks": parse_dims(subchunks),
        "shape_rule": shape_rule,
        "slab_records": slab_records,
        "layout": layout,
        "byte_groups": _parse_byte_groups(byte_groups),
        "bins": bins,
        "binning": binning,
    }
    if auto:
        options["request"] = {"kind": "auto", "objective": objective or "balanced", "error_bound": error_bound}
    return options


def _parse_byte_groups(spec) -> dict[str, list[int]]:
    """``{"f64": [2, 1, ...]}``, or CLI items ``"f64=2,1,1,1,1,1,1"``."""
    if spec is None:
        return {}
    if isinstance(spec, dict):
        return {k: [int(x) for x in v] for k, v in spec.items()}
    out = {}
    for item in spec:
        dtype, _, widths = item.partition("=")
        try:
            out[dtype.strip()] = [int(x) for x in widths.split(",")]
        except ValueError:
            raise InvalidArgumentError(f"byte groups '{item}' are not TYPE=W,W,... (e.g. f64=2,2,2,2)") from None
        if dtype.strip() not in ("f32", "f64"):
            raise InvalidArgumentError(f"byte groups are for f32 or f64, not '{dtype}'")
    return out
