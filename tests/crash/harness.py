"""Crash injection: kill writing processes with SIGKILL at random points and check what a
crash may leave.

    python tests/crash/harness.py --kills 1000      # make crash

Each round starts a process that appends a multi-slab file to a store (or, every fourth
round, garbage-collects it with no grace period, so a kill can land in gc too; or, every
eighth, imports the file into a new store; or, every eighth again, writes it into a new
store with two parallel writers, dense or hybrid; or, every eighth again, appends it step by
step through strata.Writer, whose slabs are written on a thread of its own), waits until it
is writing, and kills it after a random part of the time a whole run takes. Then:

- the store opens, at the version before the kill or the one after (a commit is atomic);
- the versions the kill could touch verify (checksums, index bounds, headers) and read back
  exactly the records they should (every version, every 100 rounds and at the end);
- `gc` removes the leftovers, leaving only files some version names;
- every tenth round, a new append succeeds;
- a killed import or parallel write leaves a whole store or none: `gc --grace 0` clears
  its leftovers and the write runs again.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import netCDF4
import numpy as np

import strata
from strata import _core
from strata.dataset import is_store

X, Y = 64, 48
CHILD = textwrap.dedent(
    """
    import sys
    import strata
    from strata import _core
    print("ready", flush=True)
    if sys.argv[1] == "append":
        strata.append_file(sys.argv[3], sys.argv[2], allow_unordered=True, retries=0)
    elif sys.argv[1] == "import":
        strata.import_file(sys.argv[3], sys.argv[2], slab_records=2)
    elif sys.argv[1] == "stream":
        import netCDF4

        with netCDF4.Dataset(sys.argv[3]) as nc:
            nc.set_auto_mask(False)
            t, v = nc["time"][:], nc["v"][:]
        with strata.Writer.append_to(sys.argv[2]) as w:  # slabs written on the writer's thread
            for i in range(len(t)):
                w.append(time=t[i], v=v[i])
    elif sys.argv[1] in ("dense", "hybrid"):
        import netCDF4
        import strata.parallel as sp

        with netCDF4.Dataset(sys.argv[3]) as nc:
            nc.set_auto_mask(False)
            t, v = nc["time"][:], nc["v"][:]
        ny, nx = v.shape[1:]
        blocks = [{"y": (0, ny // 2)}, {"y": (ny // 2, ny)}]

        def work(w, rank):
            y0, y1 = blocks[rank]["y"]
            for i in range(len(t)):
                step = {"v": v[i, y0:y1]}
                if rank == 0:
                    step["time"] = t[i]
                w.append(step)

        variables = {"time": ("f8", "time", {"units": "days since 2000-01-01"}), "v": ("f8", ("time", "y", "x"))}
        sp.write_threads(sys.argv[2], {"time": None, "y": ny, "x": nx}, variables, blocks, work,
                         placement=sys.argv[1], slab_records=2)
    else:
        _core.gc(sys.argv[2], 0.0, False)
    print("done", flush=True)
    """
)


def records(path: Path, start: int, n: int) -> Path:
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("y", Y)
        nc.createDimension("x", X)
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t[:] = np.arange(start, start + n)
        v = nc.createVariable("v", "f8", ("time", "y", "x"))
        v[:] = np.arange(start, start + n, dtype="f8")[:, None, None] * 1e4 + np.arange(Y * X).reshape(Y, X)
    return path


def expected(times: np.ndarray) -> np.ndarray:
    return times[:, None, None] * 1e4 + np.arange(Y * X).reshape(Y, X)


def check(store: Path, last: int | None = None) -> int:
    """Every version (or the newest ``last``) verifies and reads back what its records say;
    returns the newest."""
    ds = strata.open(store)
    for version in range(max(1, ds.version - last + 1) if last else 1, ds.version + 1):
        problems = _core.verify(str(store), version)[4]
        assert not problems, (version, problems[:3])
        old = strata.open(store, version)
        times = old["time"][...]
        assert np.array_equal(old["v"][...], expected(times)), f"version {version} reads wrong values"
    return ds.version


def run(kills: int, seed: int = 0, quiet: bool = False) -> dict:
    rng = random.Random(seed)
    counts = {
        "rounds": 0,
        "killed_before_commit": 0,
        "committed_anyway": 0,
        "gc_killed": 0,
        "imports_killed": 0,
        "imports_completed": 0,
        "parallel_killed": 0,
        "parallel_completed": 0,
        "stream_rounds": 0,
        "appends_after": 0,
    }
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        store = tmp / "s.strata"
        strata.import_file(records(tmp / "base.nc", 0, 4), store, slab_records=2)
        source = records(tmp / "more.nc", 1000, 16)  # eight slabs of two records per append
        # How long a whole append takes, to spread the kills over it.
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", CHILD, "append", str(store), str(source)], check=True, capture_output=True
        )
        whole = time.perf_counter() - t0
        for k in range(kills):
            if k % 8 == 5:
                _import_round(tmp / f"import{k}.strata", source, rng.uniform(0, whole * 0.6), counts)
                continue
            if k % 8 == 1:
                placement = ("dense", "hybrid")[(k // 8) % 2]
                _import_round(tmp / f"par{k}.strata", source, rng.uniform(0, whole * 0.6), counts, placement)
                continue
            before = strata.open(store).version
            kind = "gc" if k % 4 == 3 else "stream" if k % 8 == 2 else "append"
            child = subprocess.Popen(
                [sys.executable, "-c", CHILD, kind, str(store), str(source)],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            child.stdout.readline()  # "ready": strata is imported, the write starts now
            time.sleep(rng.uniform(0, whole * 0.6))
            child.send_signal(signal.SIGKILL)
            child.wait()
            counts["rounds"] += 1
            # The versions a kill could touch each round; all of them every 100 rounds.
            after = check(store, None if (k + 1) % 100 == 0 else 2)
            assert after in (before, before + 1), (before, after)
            counts["stream_rounds"] += kind == "stream"
            if kind == "gc":
                counts["gc_killed"] += 1
            elif after == before:
                counts["killed_before_commit"] += 1
            else:
                counts["committed_anyway"] += 1
            _core.gc(str(store), 0.0, False)
            named = {p for p in _named(store)}
            left = {str(p.relative_to(store)) for p in store.rglob("*") if p.is_file()}
            assert left == named, f"gc left {sorted(left - named)[:3]}"
            if k % 10 == 9:
                strata.append_file(source, store, allow_unordered=True)
                counts["appends_after"] += 1
                check(store, 1)
            if not quiet and (k + 1) % 50 == 0:
                print(f"{k + 1} kills: {counts}", flush=True)
        check(store)
    return counts


def _import_round(target: Path, source: Path, delay: float, counts: dict, kind: str = "import") -> None:
    """Kills an import (or a parallel write) into a new store: afterwards the store is
    whole, or has no version and `gc --grace 0` clears the leftovers so that the write can
    be run again."""
    what = "imports" if kind == "import" else "parallel"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, str(target), str(source)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    child.stdout.readline()
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    child.wait()
    counts["rounds"] += 1
    if is_store(target):  # committed (the manifest is the commit; HEAD may not be written yet)
        counts[f"{what}_completed"] += 1
        check(target)
        return
    counts[f"{what}_killed"] += 1
    try:
        strata.open(target)
        raise AssertionError("a store without HEAD opened")
    except strata.NotFoundError:
        pass
    if target.exists():
        _core.gc(str(target), 0.0, False)
        assert not [p for p in target.rglob("*") if p.is_file()], f"gc left files of the killed {kind}"
    if kind == "import":
        strata.import_file(source, target, slab_records=2)
    else:
        subprocess.run([sys.executable, "-c", CHILD, kind, str(target), str(source)], check=True, capture_output=True)
    check(target)


def _named(store: Path) -> set[str]:
    import json

    names = {"HEAD"}
    for m in (store / "manifests").glob("v*.json"):
        names.add(f"manifests/{m.name}")
        meta = json.loads(m.read_text())
        names.update(f["path"] for f in meta["files"])
    return names


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=1000)
    p.add_argument("--seed", type=int, default=int(os.environ.get("CRASH_SEED", "0")))
    args = p.parse_args()
    t0 = time.perf_counter()
    counts = run(args.kills, args.seed)
    print(f"crash: {counts} in {time.perf_counter() - t0:.0f} s: every store opened, verified and read back exactly")


if __name__ == "__main__":
    main()
