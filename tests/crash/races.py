"""Racing writers: several processes append to one store at the same moment, again and
again, and nothing may be lost or doubled.

    python tests/crash/races.py --races 1000      # make races

Each race releases every writer at once (a barrier) to append one record of its own to the
same store. The commit is a compare-and-swap on HEAD: one writer wins, the others get
`ConflictError` (counted), then append again on the new version (rebase) until they land.
After the last race the store must hold every record exactly once, each record's values must
be the ones its writer wrote, the newest version and a sample of older ones must verify,
and there must have been races (conflicts), or the test proved nothing.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from harness import expected, records

import strata
from strata import ConflictError, _core


def writer(k: int, writers: int, races: int, store: str, scratch: str, barrier, results) -> None:
    first_try_wins = conflicts = 0
    try:
        for r in range(races):
            # The file is made before the barrier: the race is on the commit, not on netCDF.
            source = records(Path(scratch) / f"w{k}-r{r}.nc", 1 + r * writers + k, 1)
            barrier.wait(timeout=120)
            try:
                strata.append_file(source, store, allow_unordered=True, retries=0)
                first_try_wins += 1
            except ConflictError:
                conflicts += 1
                # Rebase: the same append on the version that won, as often as it takes.
                strata.append_file(source, store, allow_unordered=True, retries=writers * 20)
            source.unlink()
        results.put((k, first_try_wins, conflicts, ""))
    except Exception as e:  # reported, and the run fails
        barrier.abort()
        results.put((k, first_try_wins, conflicts, f"{type(e).__name__}: {e}"))


def run(races: int, writers: int = 2, seed: int = 0, quiet: bool = False) -> dict:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="strata-races-") as tmp:
        tmp = Path(tmp)
        store = tmp / "s.strata"
        strata.import_file(records(tmp / "base.nc", 0, 1), store)
        ctx = mp.get_context("spawn")  # no forked copies of the engine's thread pools
        barrier, results = ctx.Barrier(writers), ctx.Queue()
        procs = [
            ctx.Process(target=writer, args=(k, writers, races, str(store), str(tmp), barrier, results))
            for k in range(writers)
        ]
        t0 = time.perf_counter()
        for p in procs:
            p.start()
        reports = [results.get(timeout=races * 5 + 120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        took = time.perf_counter() - t0
        failures = [f"writer {k}: {err}" for k, _, _, err in reports if err]
        if failures:
            raise AssertionError("; ".join(failures))

        ds = strata.open(store)
        stored = ds["time"][...]
        order = np.argsort(stored, kind="stable")
        times = stored[order]
        want = np.arange(1 + races * writers, dtype="f8")
        found = set(times.tolist())
        lost = int(sum(1 for t in want if t not in found))
        doubled = int(len(times) - len(found))
        # Each record's values name its time (harness.records), so a misplaced one shows.
        wrong = int(np.count_nonzero(np.any(ds["v"][...][order] != expected(times), axis=(1, 2))))
        # The newest version names every file; older ones are sampled (each verify reads
        # every file of its version, so all of them would cost the square of the races).
        versions = [ds.version, *rng.sample(range(1, ds.version), min(20, ds.version - 1))]
        unverified = [v for v in versions if _core.verify(str(store), v)[4]]
        counts = {
            "races": races,
            "writers": writers,
            "appends": races * writers,
            "first_try_wins": sum(r[1] for r in reports),
            "conflicts": sum(r[2] for r in reports),
            "lost": lost,
            "doubled": doubled,
            "wrong_records": wrong,
            "versions": ds.version,
            "versions_verified": len(versions),
            "versions_failing_verify": len(unverified),
            "seconds": round(took, 1),
        }
    if not quiet:
        print(counts)
    return counts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--races", type=int, default=1000)
    p.add_argument("--writers", type=int, default=2, help="processes released together in each race")
    p.add_argument("--seed", type=int, default=0, help="picks the older versions that are verified")
    args = p.parse_args()
    if args.writers < 2 or args.races < 1:
        p.error("a race needs at least two writers and one round")
    counts = run(args.races, args.writers, args.seed, quiet=True)
    print(f"races: {counts}")
    bad = counts["lost"] + counts["doubled"] + counts["wrong_records"] + counts["versions_failing_verify"]
    if bad or counts["versions"] != counts["appends"] + 1:  # the import is version 1
        sys.exit("races: appends were lost, doubled or wrong")
    print(
        f"races: {counts['appends']} appends in {counts['races']} races, {counts['conflicts']} conflicts "
        f"rebased, 0 lost, 0 doubled, every record exact"
    )


if __name__ == "__main__":
    main()
