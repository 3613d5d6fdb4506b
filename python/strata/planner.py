"""The query planner's cost model: where it is stored, how it is measured, and ``explain``.

A value query can be answered two ways: from the index (segments classified by their
summaries, boundary ones read, returned values gathered by position) or by a scan (every
sub-chunk of the variables involved read whole and filtered in memory). For each slab the
planner counts, from the index alone, the work each way would do — stored bytes and
segments fetched, sub-chunk reads, elements decoded, tested, taken from bitmaps, gathered —
and multiplies it by per-unit costs in nanoseconds. The cheaper method runs.

The per-unit costs are the machine's: ``strata calibrate`` times both methods on generated
stores over a sweep of selectivities and outputs, fits each method's constants by
non-negative least squares on relative error (``strata_core::calibrate``), and writes them
to the cost model file:
``$STRATA_COST_MODEL``, else ``~/.config/strata/cost_model.json``. Without a file the
built-in defaults apply (measured on a 2-core x86-64 machine). The engine's session
(``strata.query.session()``, shared by ``Dataset.query``, ``query_batches`` and
``strata.sql``) corrects each method's estimate by the ratio of observed to estimated time
of the queries it runs (a moving average), so a model that is off for this store or this
machine converges on it; on close calls the method estimated slower still runs now and
then, so both corrections are learned. Planning, the choice and the corrections are
``strata_core::session``'s, the fit ``strata_core::calibrate``'s; this module shows progress.
"""

from __future__ import annotations

from pathlib import Path

from . import _core


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


def calibrate(*, quick: bool = False, repeats: int = 3, progress: bool = True) -> _core.Calibration:
    """Measures the cost constants on this machine and stores them (see module docs; the
    engine's ``strata_core::calibrate`` does the work). Returns what was written: ``path``,
    ``source``, the constants (``ns``, ``scan_ns``) and the fit's quality."""
    from tqdm import tqdm

    bar = None

    def step(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, desc="calibrating", disable=not progress, leave=False)
        bar.update(done - bar.n)

    try:
        return _core.calibrate(quick, repeats, step)
    finally:
        if bar is not None:
            bar.close()
