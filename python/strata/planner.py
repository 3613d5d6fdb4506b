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
built-in defaults apply (measured on a 2-core x86-64 machine). Within a SQL session, and
within a process for ``Dataset.query``, the ratio of observed to estimated time of the
queries run corrects each method's estimate (a moving average), so a model that is off for
this store or this machine converges on it; on close calls the method estimated slower
still runs now and then, so both corrections are learned.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InvalidArgumentError

FEATURES = ("bytes", "segments", "calls", "decoded", "tested", "indexed", "gathered")
COEFFICIENTS = ("byte", "segment", "call", "decoded", "tested", "indexed", "gathered")


def cost_model_path() -> Path:
    env = os.environ.get("STRATA_COST_MODEL")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "strata" / "cost_model.json"


def load_cost_model_json() -> str | None:
    """The stored cost model (JSON text), or None for the built-in defaults."""
    path = cost_model_path()
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise InvalidArgumentError(f"cannot read the cost model {path}: {err}") from err


def plan(
    ds,
    tree: dict,
    starts,
    stops,
    steps,
    outputs: list[str],
    level: int | None,
    force: str | None = None,
    model_json: str | None = None,
    refined: bool = False,
) -> dict:
    """The planner's plan for a query on an open dataset (see ``strata_core::planner``).

    ``model_json``: the stored model (read from the cost model file when None). ``refined``:
    plan with the process's model, the stored one corrected by the queries observed so far."""
    if model_json is None:
        model_json = load_cost_model_json()
    text = ds._reader.plan(json.dumps(tree), starts, stops, steps, outputs, level, model_json, force, refined)
    return json.loads(text)


def chosen_seconds(p: dict, method: str) -> float:
    return sum(s[f"{method}_seconds"] for s in p["slabs"])


def _work(p: dict, method: str) -> np.ndarray:
    return np.array([sum(s[method][f] for s in p["slabs"]) for f in FEATURES], dtype=float)


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


def _synthetic_store(path: str, layout: str, shape=(32, 256, 256), seed: int = 7) -> None:
    from .writer import write_arrays

    rng = np.random.default_rng(seed)
    t, y, x = np.meshgrid(*(np.linspace(0, 1, n, dtype=np.float32) for n in shape), indexing="ij")
    field = (20 + 8 * np.sin(6 * x + 3 * t) * np.cos(4 * y) + rng.normal(0, 0.3, shape)).astype(np.float32)
    other = (field * 0.5 + rng.normal(0, 1.0, shape)).astype(np.float32)
    write_arrays(
        path,
        {"a": (("t", "y", "x"), field), "b": (("t", "y", "x"), other)},
        record_dim="t",
        layout=layout,
        bins=16 if "V" in layout else None,
    )


def calibrate(*, quick: bool = False, repeats: int = 3, progress: bool = True) -> dict[str, Any]:
    """Measures the cost constants on this machine and stores them (see module docs).
    Returns the model written, with the fit's quality under ``"fit"``."""
    from .dataset import open as open_dataset

    shape = (16, 128, 128) if quick else (32, 256, 256)
    quantiles = (0.001, 0.01, 0.05, 0.2, 0.5, 0.9, 0.99)
    rows: list[tuple[np.ndarray, float]] = []
    picks = []  # (chosen method's time, best time) per query, with the fitted model
    samples: list[tuple[dict, dict, dict]] = []
    with tempfile.TemporaryDirectory(prefix="strata-calibrate-") as tmp:
        cases = []
        for layout in ("V-S", "S"):
            path = os.path.join(tmp, f"{layout}.strata")
            _synthetic_store(path, layout, shape)
            cases.append(path)
        jobs = [(p, q, outs) for p in cases for q in quantiles for outs in ([], ["a"], ["a", "b"])]
        bar = _progress(len(jobs), "calibrating", progress)
        for path, q, outs in jobs:
            ds = open_dataset(path, cache_bytes=0)
            nslabs = len(ds.manifest["slabs"])
            values = ds["a"].values
            threshold = float(np.quantile(values, 1 - q))
            tree = {"kind": "cmp", "var": "a", "op": ">", "value": threshold}
            full = [0, 0, 0], list(shape), [1, 1, 1]
            timed = {}
            for method in ("index", "scan"):
                p = plan(ds, tree, *full, outs, None, force=method)
                best = np.inf
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    if outs:
                        ds._reader.points(json.dumps(tree), *full, outs, None, dict.fromkeys(range(nslabs), method))
                    else:
                        ds._reader.select(json.dumps(tree), *full, True, method)
                    best = min(best, time.perf_counter() - t0)
                rows.append((_work(p, method), best * 1e9))
                timed[method] = best
            samples.append((tree, timed, {"path": path, "outs": outs}))
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
    path = cost_model_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = path.with_suffix(".tmp")
    tmp_path.write_text(json.dumps(model, indent=2))
    tmp_path.replace(path)
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
