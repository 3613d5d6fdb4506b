"""Which codec chain suits each variable: compress a sample with every candidate.

The rules live in the engine (``strata_core::sampling`` and ``strata_codecs::plan``): the
sample is up to ``samples`` blocks of the sub-chunk shape, spread evenly along the leading
(usually time) dimension and at positions seeded by the variable's name along the others;
objectives rank chains by the ratio measured on the sample and the speeds the codecs
declare, so a plan does not depend on the machine's load. This module reads the sample from
a file or a store and shows the table; writers plan inside the engine.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import _core
from .errors import InvalidArgumentError, StrataError

# NumPy and the importer load when an analysis runs: `import strata` (and with it every
# command line's start) does not pay for them.
if TYPE_CHECKING:
    from .importer import PlannedVariable


@dataclass
class VariableAnalysis:
    name: str
    dtype: str
    sample_bytes: int
    #: One `_core.ChainScore` per candidate: `chain`, `ratio`, `lossless`, the declared
    #: `encode_mb_s`/`decode_mb_s`, the `measured_encode_mb_s`/`measured_decode_mb_s` (None
    #: unless timed) and `value` (per objective, higher is better).
    scores: list
    choice: dict[str, str | None]
    #: The ratio netCDF4's zlib 4 + shuffle reaches on the same sample: balanced's choice
    #: stores less than this (by 15%) when any candidate does.
    reference: float | None = None
    #: What the import stores (a file: ``strata import`` with no options, or with this error
    #: bound, previewed by the engine's writer; a store: what it holds): chain, shapes and
    #: plan, whose first look samples fewer blocks and which may look twice.
    stored: PlannedVariable | None = None


def _variables(path: str):
    """(name, stored type, shape, reader) for every numeric variable of a store or a file."""
    from .dataset import is_store

    if is_store(path):
        from .dataset import open as open_store

        ds = open_store(path)
        for name, var in ds.variables.items():
            if var.dtype_name != "string":
                yield name, var.dtype_name, var.shape, var.__getitem__
        return
    from ._sources import open_source, source_dtype

    nc = open_source(path)
    try:
        for name, var in nc.variables.items():
            dtype = source_dtype(var)
            if dtype != "string":
                yield name, dtype, var.shape, var.__getitem__
    finally:
        nc.close()


def analyze_variable(
    name: str,
    dtype: str,
    shape: tuple[int, ...],
    read,
    *,
    samples: int = 8,
    candidates: list[str] | None = None,
    min_seconds: float | None = 0.02,
) -> VariableAnalysis:
    """Scores candidate chains on a sample of one variable (``read`` indexes it). Speeds are
    also timed here unless ``min_seconds`` is None; choices use the declared ones."""
    import numpy as np

    from ._slabs import le_bytes

    if samples < 1:
        raise InvalidArgumentError(f"samples must be at least 1 (got {samples})")
    itemsize = 1 if dtype == "char" else int(dtype[1:]) // 8
    shape = tuple(int(n) for n in shape)
    # Blocks of the sub-chunk shape the writer cuts by default (a small variable it may keep
    # whole is still planned on these).
    block = [int(b) for b in _core.auto_shape(list(shape), itemsize, _core.DEFAULT_SUBCHUNK_BYTES)]
    sample = []
    for start in _core.sample_starts(name, list(shape), block, samples):
        box = tuple(slice(s, s + min(b, n)) for s, b, n in zip(start, block, shape, strict=True))
        arr = np.asarray(read(box))
        sample.append((le_bytes(arr, dtype), list(arr.shape)))
    result = _core.analyze_samples(dtype, sample, candidates, min_seconds)
    return VariableAnalysis(
        name, dtype, sum(s[0].nbytes for s in sample), result.scores, result.choice, result.reference
    )


def analyze(
    path: str | os.PathLike,
    variables: list[str] | None = None,
    *,
    samples: int = 8,
    candidates: list[str] | None = None,
    min_seconds: float | None = 0.02,
    error_bound: str | None = None,
) -> list[VariableAnalysis]:
    """Scores candidate chains per variable of a NetCDF/HDF5 file or a store. With
    ``error_bound`` (``abs=E`` or ``rel=E``) the lossy codecs are scored too."""
    path = os.fspath(path)
    found = []
    for name, dtype, shape, read in _variables(path):
        if (variables and name not in variables) or math.prod(int(n) for n in shape) == 0:
            continue
        chosen = candidates if candidates is not None else candidates_for(dtype, error_bound)
        found.append(
            analyze_variable(name, dtype, shape, read, samples=samples, candidates=chosen, min_seconds=min_seconds)
        )
    missing = set(variables or []) - {v.name for v in found}
    if missing:
        raise InvalidArgumentError(f"no numeric variable(s) {', '.join(sorted(missing))} in '{path}'")
    stored = _stored(path, [v.name for v in found], error_bound)
    for v in found:
        v.stored = stored.get(v.name)
    return found


def _stored(path: str, names: list[str], error_bound: str | None) -> dict[str, PlannedVariable]:
    """What an import of the file would store (the writer's preview), or what the store holds."""
    from .dataset import is_store
    from .importer import PlannedVariable, preview_import

    if not names:
        return {}
    if not is_store(path):
        try:
            return {p.name: p for p in preview_import(path, names, error_bound=error_bound)}
        except StrataError as e:
            # The scores stand on their own: an import that would be refused is said, not raised.
            warnings.warn(f"'{path}' would not import as it is: {e}", stacklevel=3)
            return {}
    from .dataset import open as open_store

    ds = open_store(path)
    return {
        n: PlannedVariable(
            name=n,
            dtype=ds[n].dtype_name,
            shape=ds[n].shape,
            chunks=ds[n].chunks,
            subchunks=ds[n].subchunks,
            chain=ds[n].chains[-1] if ds[n].chains else None,
            plan=ds[n].plan,
        )
        for n in names
    }


def candidates_for(dtype: str, error_bound: str | None = None) -> list[str]:
    """The analyzer's candidates for ``dtype``; with an error bound (``abs=E`` or ``rel=E``),
    float types also get the lossy backends at that bound."""
    return _core.candidates(dtype, error_bound)
