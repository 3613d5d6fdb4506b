"""Which codec chain suits each variable: compress a sample with every candidate.

Sample rule (documented in docs/codecs.md): for each numeric variable, up to ``samples``
blocks of the sub-chunk shape the importer would choose (64 KiB targets); the blocks are
spread evenly along the leading (usually time) dimension and placed at random (seeded)
along the others, so the sample covers the whole period and different regions.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from . import _core
from .errors import InvalidArgumentError

SUBCHUNK_BYTES = 64 << 10


@dataclass
class VariableAnalysis:
    name: str
    dtype: str
    sample_bytes: int
    scores: list[dict]
    choice: dict[str, str]


def _blocks(shape: tuple[int, ...], block: list[int], count: int, rng) -> list[tuple[slice, ...]]:
    if not shape:
        return [()]
    grid = [max(1, n - b + 1) for n, b in zip(shape, block, strict=True)]
    count = max(1, min(count, int(np.prod(grid, dtype=np.int64))))
    out = []
    for i in range(count):
        lead = round(i * (grid[0] - 1) / max(count - 1, 1))
        rest = [int(rng.integers(0, g)) for g in grid[1:]]
        starts = [lead, *rest]
        out.append(tuple(slice(s, s + b) for s, b in zip(starts, block, strict=True)))
    return out


def _variables(path: str):
    """(name, stored type, shape, reader) for every numeric variable of a store or a file."""
    if os.path.isfile(os.path.join(path, "HEAD")):
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
    rng=None,
    candidates: list[str] | None = None,
    min_seconds: float = 0.02,
) -> VariableAnalysis:
    """Scores candidate chains on a sample of one variable (``read`` indexes it)."""
    from ._slabs import le_bytes

    rng = rng if rng is not None else np.random.default_rng(0)
    itemsize = 1 if dtype == "char" else int(dtype[1:]) // 8
    block = [int(b) for b in _core.auto_shape(list(shape), itemsize, SUBCHUNK_BYTES)]
    sample = []
    for box in _blocks(tuple(shape), block, samples, rng):
        arr = np.asarray(read(box))
        sample.append((le_bytes(arr, dtype), list(arr.shape)))
    result = json.loads(_core.analyze_samples(dtype, sample, candidates, min_seconds))
    return VariableAnalysis(name, dtype, sum(s[0].nbytes for s in sample), result["scores"], result["choice"])


def analyze(
    path: str | os.PathLike,
    variables: list[str] | None = None,
    *,
    samples: int = 8,
    seed: int = 0,
    candidates: list[str] | None = None,
    min_seconds: float = 0.02,
    error_bound: str | None = None,
) -> list[VariableAnalysis]:
    """Scores candidate chains per variable of a NetCDF/HDF5 file or a store. With
    ``error_bound`` (``abs=E`` or ``rel=E``) the lossy codecs are scored too."""
    path = os.fspath(path)
    parse_error_bound(error_bound)
    rng = np.random.default_rng(seed)
    found = []
    for name, dtype, shape, read in _variables(path):
        if (variables and name not in variables) or int(np.prod(shape, dtype=np.int64)) == 0:
            continue
        chosen = candidates if candidates is not None or not error_bound else candidates_for(dtype, error_bound)
        found.append(
            analyze_variable(
                name,
                dtype,
                shape,
                read,
                samples=samples,
                rng=rng,
                candidates=chosen,
                min_seconds=min_seconds,
            )
        )
    missing = set(variables or []) - {v.name for v in found}
    if missing:
        raise InvalidArgumentError(f"no numeric variable(s) {', '.join(sorted(missing))} in '{path}'")
    return found


LOSSY_BACKENDS = ("sz", "zfp")


def parse_error_bound(text: str | None) -> str | None:
    """Checks an error bound given as ``abs=E`` or ``rel=E``; returns it normalised."""
    if text is None:
        return None
    kind, _, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if kind.strip() not in ("abs", "rel") or not (number > 0 and np.isfinite(number)):
        raise InvalidArgumentError(f"error bound '{text}' is not abs=E or rel=E with E > 0 (e.g. abs=0.01, rel=1e-4)")
    return f"{kind.strip()}={number:g}"


def candidates_for(dtype: str, error_bound: str | None = None) -> list[str]:
    """The analyzer's lossless candidates for ``dtype``; with an error bound, float types also
    get the lossy backends at that bound."""
    base = json.loads(_core.default_candidates(dtype))
    bound = parse_error_bound(error_bound)
    if bound and dtype in ("f32", "f64"):
        base += [f"{b}:{bound}" for b in LOSSY_BACKENDS]
    return base


def candidates_with(dtype: str, chain: str, error_bound: str | None = None) -> list[str]:
    """The analyzer's candidates for ``dtype``, plus ``chain`` if it is not among them."""
    base = candidates_for(dtype, error_bound)
    return base if chain in base else [*base, chain]


def chain_text(specs: list[dict]) -> str:
    """The short form (``shuffle+zstd:3``, ``sz:abs=0.01``) of a chain as stored in a manifest."""
    option = {name: opt for name, _, opt in _core.known_codecs()}
    parts = []
    for spec in specs:
        config = spec.get("configuration", {})
        main = option.get(spec["name"])
        if main and set(config) == {main}:
            parts.append(f"{spec['name']}:{config[main]}")
        elif config:
            parts.append(f"{spec['name']}:" + ",".join(f"{k}={v:g}" for k, v in sorted(config.items())))
        else:
            parts.append(spec["name"])
    return "+".join(parts)


def plan_record(analysis: VariableAnalysis, objective: str, chosen: str, **extra) -> dict:
    """What the manifest keeps of an analysis: objective, choice and the sample's scores."""
    return {
        "objective": objective,
        "chosen": chosen,
        "sample_bytes": analysis.sample_bytes,
        "scores": [
            {k: (round(v, 4) if isinstance(v, float) else v) for k, v in s.items() if k != "value"}
            for s in analysis.scores
        ],
        **extra,
    }
