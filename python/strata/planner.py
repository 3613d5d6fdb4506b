"""The query planner's cost model: where it is stored, how it is measured, and ``explain``.

A value query can be answered two ways: from the index (segments classified by their
summaries, boundary ones read, returned values gathered by position) or by a scan (every
sub-chunk of the variables involved read whole and filtered in memory). For each slab the
planner counts, from the index alone, the work each way would do — stored bytes and
segments fetched, sub-chunk reads, elements decoded, tested, taken from bitmaps, gathered —
and multiplies it by per-unit costs in nanoseconds. The cheaper method runs.

The per-unit costs are the machine's: ``strata calibrate`` times both methods on generated
stores over a sweep of selectivities and outputs, fits each method's constants by
non-negative least squares on relative error, and writes them to the cost model file:
``$STRATA_COST_MODEL``, else ``~/.config/strata/cost_model.json``. Without a file the
built-in defaults apply (measured on a 2-core x86-64 machine). The engine's session
(``strata.query.session()``, shared by ``Dataset.query``, ``query_batches`` and
``strata.sql``) corrects each method's estimate by the ratio of observed to estimated time
of the queries it runs (a moving average), so a model that is off for this store or this
machine converges on it; on close calls the method estimated slower still runs now and
then, so both corrections are learned. Planning, the choice and the corrections are
``strata_core::session``'s; this module fits the constants.
"""

from __future__ import annotations

import os
import platform
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from . import _core

FEATURES = ("bytes", "segments", "calls", "decoded", "tested", "indexed", "gathered")
COEFFICIENTS = ("byte", "segment", "call", "decoded", "tested", "indexed", "gathered")


def cost_model_path() -> Path:
    """Where the cost model is stored (the engine decides: ``$STRATA_COST_MODEL``, else
    ``$XDG_CONFIG_HOME/strata/cost_model.json``, else ``~/.config/strata/cost_model.json``)."""
    return Path(_core.cost_model_path())


def load_cost_model_json() -> str | None:
    """The stored cost model (JSON text), or None for the built-in defaults."""
    from .errors import InvalidArgumentError

    path = cost_model_path()
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise InvalidArgumentError(f"cannot read the cost model {path}: {err}") from err


def _nnls(a: np.ndarray, b: np.ndarray, iterations: int = 200) -> np.ndarray:
    """min ||a x - b|| subject to x >= 0 (Lawson-Hanson active set)."""
    n = a.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    for _ in range(iterations):
        w = a.T @ (b - a @ x)
        if passive.all() or (w[~passive] <= 1e-12 * max(1.0, np.abs(w).max())).all():
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > 1e-15
    return x


# The constants the work is counted under while calibrating (any model counts the same work).
_DEFAULT_MODEL = {"version": 1, "source": "calibration", "ns": dict.fromkeys(COEFFICIENTS, 1.0)}

# The fill value of the calibration store with land.
_LAND_FILL = np.float32(-999.0)


def _synthetic_store(path: str, layout: str, shape=(32, 256, 256), seed: int = 7, land: bool = False) -> None:
    from .writer import write_arrays

    rng = np.random.default_rng(seed)
    t, y, x = np.meshgrid(*(np.linspace(0, 1, n, dtype=np.float32) for n in shape), indexing="ij")
    field = (20 + 8 * np.sin(6 * x + 3 * t) * np.cos(4 * y) + rng.normal(0, 0.3, shape)).astype(np.float32)
    other = (field * 0.5 + rng.normal(0, 1.0, shape)).astype(np.float32)
    attrs = {}
    if land:
        # A fill value over about 40% of the grid, as an ocean field has over land:
        # under level V the fills form segments of their own that cost next to nothing to
        # decode, so segments stop counting as all alike.
        coast = (np.sin(9 * x) * np.cos(7 * y) > 0.25) | (y > 0.85)
        field[coast] = _LAND_FILL
        attrs = {"_FillValue": _LAND_FILL}
    write_arrays(
        path,
        {"a": (("t", "y", "x"), field, attrs), "b": (("t", "y", "x"), other)},
        record_dim="t",
        layout=layout,
        bins=16 if "V" in layout else None,
    )


def calibrate(*, quick: bool = False, repeats: int = 3, progress: bool = True) -> dict[str, Any]:
    """Measures the cost constants on this machine and stores them (see module docs).
    Returns the model written, with the fit's quality under ``"fit"``."""
    import json
    import time

    from .dataset import open as open_dataset

    shape = (16, 128, 128) if quick else (32, 256, 256)
    quantiles = (0.001, 0.01, 0.05, 0.2, 0.5, 0.9, 0.99)
    rows: list[tuple[np.ndarray, float]] = []
    picks = []  # (chosen method's time, best time) per query, with the fitted model
    samples: list[tuple[dict, dict, dict]] = []
    with tempfile.TemporaryDirectory(prefix="strata-calibrate-") as tmp:
        cases = []
        # With one kind of store, the time per segment and per element cannot be told
        # apart (all segments hold alike), and a store of many small or fill-only segments
        # is misjudged: ERSST x4, a third of it land, scanned in 0.45-0.6x the estimate.
        for layout, land in (("V-S", False), ("V-S", True), ("S", False)):
            path = os.path.join(tmp, f"{layout}{'-land' if land else ''}.strata")
            _synthetic_store(path, layout, shape, land=land)
            cases.append(path)
        jobs = [(p, q, outs) for p in cases for q in quantiles for outs in ([], ["a"], ["a", "b"])]
        bar = _progress(len(jobs), "calibrating", progress)
        valid: dict[str, np.ndarray] = {}  # each store's values of "a" but fills, read once
        for path, q, outs in jobs:
            ds = open_dataset(path, cache_bytes=0)
            if path not in valid:
                values = ds["a"].values
                valid[path] = values[values != _LAND_FILL]
            threshold = float(np.quantile(valid[path], 1 - q))
            constraint = _core.Constraint(f"a > {threshold!r}")
            full = [0, 0, 0], list(shape), [1, 1, 1]
            output = "points" if outs else "count"
            timed = {}
            for method in ("index", "scan"):
                # A session of its own: what these forced runs teach is not for later queries.
                session = _core.Session(json.dumps(_DEFAULT_MODEL))
                query = _core.Query(constraint, *full, output=output, variables=outs, method=method)
                p = session.plan(ds._reader, query)
                best = np.inf
                for _ in range(repeats):
                    *_, answer = session.query(ds._reader, query)
                    best = min(best, answer.seconds)
                rows.append((np.array(p.work(method)), best * 1e9))
                timed[method] = best
            samples.append((str(constraint), timed, {"path": path, "outs": outs}))
            bar.update(1)
        bar.close()
    a = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    # Rows alternate index, scan. Each method gets its own constants: a decoded element
    # or a fetched segment does not cost the same inside the two methods' loops. Relative
    # error: each measurement weighs the same whatever its duration.
    fits = {}
    predicted = np.zeros(len(y))
    for method, rows_of in (("index", slice(0, None, 2)), ("scan", slice(1, None, 2))):
        coef = _nnls(a[rows_of] / y[rows_of, None], np.ones(len(y[rows_of])))
        fits[method] = coef
        predicted[rows_of] = a[rows_of] @ coef
    rel = np.abs(predicted / y - 1)
    for i in range(0, len(rows), 2):
        ti, ts = y[i], y[i + 1]
        pick = ti if predicted[i] <= predicted[i + 1] else ts
        picks.append(pick / min(ti, ts))
    model = {
        "version": 1,
        "source": f"calibrated {time.strftime('%Y-%m-%d')} on {platform.node() or 'this machine'} "
        f"({os.cpu_count()} cores, {len(rows)} timings)",
        "ns": {name: float(c) for name, c in zip(COEFFICIENTS, fits["index"], strict=True)},
        "scan_ns": {name: float(c) for name, c in zip(COEFFICIENTS, fits["scan"], strict=True)},
        "index_correction": 1.0,
        "scan_correction": 1.0,
    }
    path = Path(_core.save_cost_model(json.dumps(model)))
    model["fit"] = {
        "path": str(path),
        "timings": len(rows),
        "median_relative_error": float(np.median(rel)),
        "worst_pick_slowdown": float(max(picks)),
        "picks_within_10pct": float(np.mean(np.array(picks) <= 1.10)),
    }
    return model


def _progress(total: int, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False)
