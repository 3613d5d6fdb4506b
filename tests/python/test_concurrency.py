"""Writers racing on one store: each commit is all or nothing, a writer that loses the race
starts again on the new version, nothing is lost or duplicated, and readers meanwhile only
ever see complete versions."""

import subprocess
import sys
import textwrap
import threading

import numpy as np
import races
from harness import expected, records

import strata
from strata import _core

APPENDER = textwrap.dedent(
    """
    import sys
    import strata
    for source in sys.argv[2:]:
        strata.append_file(source, sys.argv[1], allow_unordered=True, retries=50)
    """
)


def test_racing_appenders_lose_nothing_and_readers_see_whole_versions(tmp_path):
    store = tmp_path / "s.strata"
    strata.import_file(records(tmp_path / "base.nc", 0, 2), store)
    sources = [records(tmp_path / f"r{t}.nc", t, 1) for t in range(2, 14)]
    seen, problems, stop = set(), [], threading.Event()

    def reader():
        while not stop.is_set():
            ds = strata.open(store)
            times, values = ds["time"][...], ds["v"][...]
            if values.shape[0] != times.shape[0] or not np.array_equal(values, expected(times)):
                problems.append((ds.version, times.tolist()))
            seen.add(ds.version)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    procs = [
        subprocess.Popen([sys.executable, "-c", APPENDER, str(store), *map(str, sources[k::4])], stderr=subprocess.PIPE)
        for k in range(4)
    ]
    errors = [p.communicate(timeout=300)[1].decode() for p in procs]
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert all(p.returncode == 0 for p in procs), errors
    assert not problems, problems[:3]
    ds = strata.open(store)
    assert ds.version == 13 and sorted(ds["time"][...].tolist()) == list(range(14))
    assert len(seen) > 1, "the readers saw the store change"
    for version in range(1, 14):
        assert not _core.verify(str(store), version)[4], f"version {version} does not verify"


def test_writers_released_together_lose_and_double_nothing():
    """A few rounds of `make races`: three processes append at the same moment each round."""
    counts = races.run(12, writers=3, quiet=True)
    assert counts["lost"] == counts["doubled"] == counts["wrong_records"] == 0
    assert counts["versions"] == 1 + 36 and counts["versions_failing_verify"] == 0
    # The writers did race: commits were refused and rebased.
    assert counts["conflicts"] > 0
