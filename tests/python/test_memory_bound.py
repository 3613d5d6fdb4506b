"""Import streams: peak memory grows with the slab size, not with the file size.

Peaks are read from /proc/self/status (VmHWM, reset through /proc/self/clear_refs), not
from getrusage: its ru_maxrss survives execve, so a child of a large pytest process starts
at its parent's peak and a growth measured that way can read 0.
"""

import subprocess
import sys
import textwrap

# Shared by the scripts below: the process's resident and peak resident kilobytes.
MEMORY = """
def kb(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))

def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return kb("VmRSS")
"""

SCRIPT = textwrap.dedent(
    """
    import sys, netCDF4, numpy as np
    import strata

    src, out = sys.argv[1], sys.argv[2]
    records, ny, nx = 1600, 180, 360            # 1600 x 180 x 360 f32 = 415 MB
    with netCDF4.Dataset(src, "w", format="NETCDF3_64BIT_OFFSET") as nc:
        nc.createDimension("time", None)
        nc.createDimension("y", ny)
        nc.createDimension("x", nx)
        v = nc.createVariable("field", "f4", ("time", "y", "x"))
        base = np.sin(np.arange(ny * nx, dtype="f4")).reshape(ny, nx)
        for t0 in range(0, records, 100):
            v[t0 : t0 + 100] = base[None] + np.arange(t0, t0 + 100, dtype="f4")[:, None, None]
    before = reset_peak()
    strata.import_file(src, out, slab_records=40)   # 40 records = 10 MB slabs
    after = kb("VmHWM")
    ds = strata.open(out)
    assert ds["field"].shape == (records, ny, nx)
    assert ds["field"][1599, 0, 1] == base[0, 1] + np.float32(1599)
    print((after - before) // 1024)
    """
)


def test_import_memory_is_bounded_by_slabs_not_file_size(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", MEMORY + SCRIPT, str(tmp_path / "big.nc"), str(tmp_path / "big.strata")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    growth_mb = int(result.stdout.strip().splitlines()[-1])
    # The file is 415 MB; holding it would grow the process by at least that much.
    assert growth_mb < 120, f"peak memory grew by {growth_mb} MB while importing a 415 MB file"


STATIC_SCRIPT = textwrap.dedent(
    """
    import sys, netCDF4, numpy as np
    import strata

    src, out, layout, noisy = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "noisy"
    members, times, ny, nx = 4, 400, 180, 360   # 4 x 400 x 180 x 360 f32 = 415 MB
    with netCDF4.Dataset(src, "w") as nc:
        for name, n in (("member", members), ("time", times), ("y", ny), ("x", nx)):
            nc.createDimension(name, n)
        # Named members along the leading dimension: strings cannot run along a record
        # dimension, so the store has none and the field is one static variable.
        m = nc.createVariable("member", str, ("member",))
        m[:] = np.array([f"r{i}i1p1" for i in range(members)], dtype=object)
        v = nc.createVariable("tas", "f4", ("member", "time", "y", "x"))
        base = np.sin(np.arange(ny * nx, dtype="f4")).reshape(ny, nx)
        for i in range(members):
            member = base[None] + np.arange(times, dtype="f4")[:, None, None] + np.float32(1000 * i)
            if noisy:
                # Noise over the whole range in every block: each sub-chunk then holds every
                # bin, and level V's positions are as large as they get.
                member = base[None] + np.random.default_rng(i).normal(0, 1, (times, ny, nx)).astype("f4")
            v[i] = member
        last = member[-1]
    before = reset_peak()
    strata.import_file(src, out, layout=layout)
    after = kb("VmHWM")
    ds = strata.open(out)
    assert ds.manifest["record_dim"] is None
    got = ds["tas"][3, 399]
    assert np.array_equal(got, last), "the last block reads back"
    assert list(ds["member"][...]) == ["r0i1p1", "r1i1p1", "r2i1p1", "r3i1p1"]
    grew = (after - before) // 1024
    # And back to a file, in blocks too (one member, 104 MB, is more than a block).
    before = reset_peak()
    strata.export_file(out, out + ".nc", zlib=False)
    after = kb("VmHWM")
    with netCDF4.Dataset(out + ".nc") as nc:
        assert np.array_equal(nc["tas"][3, 399], got)
    exported = (after - before) // 1024
    # A count of the whole field, the store opened afresh without a decoded-segment cache.
    ds = strata.open(out, cache_bytes=0)
    before = reset_peak()
    n = ds.query("tas > 2.5", output="count", method="index")
    after = kb("VmHWM")
    assert n == ds.query("tas > 2.5", output="count", method="scan")
    print(grew, exported, (after - before) // 1024)
    """
)


def static_import(tmp_path, layout: str, noisy: bool = False) -> tuple[int, int, int]:
    """Peak growth (MB) importing, exporting, then counting by index the 415 MB static
    field under `layout`."""
    args = [str(tmp_path / "ens.nc"), str(tmp_path / "ens.strata"), layout, "noisy" if noisy else "smooth"]
    result = subprocess.run([sys.executable, "-c", MEMORY + STATIC_SCRIPT, *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    growth_mb, export_mb, count_mb = map(int, result.stdout.strip().splitlines()[-1].split())
    return growth_mb, export_mb, count_mb


def test_a_large_variable_without_the_record_dimension_is_imported_in_blocks(tmp_path):
    growth_mb, export_mb, _ = static_import(tmp_path, "S")
    # Read whole, the 415 MB field grew the process by 427 MB here (and by its compressed
    # bytes too before they spilled); in blocks of about a slab (64 MiB), by 75 MB.
    assert growth_mb < 200, f"peak memory grew by {growth_mb} MB importing a 415 MB static variable"
    # Exported a member at a time it grew by 274 MB here; in blocks, by 121 to 129 MB.
    assert export_mb < 200, f"peak memory grew by {export_mb} MB exporting a 415 MB static variable"


def test_level_v_positions_of_a_large_static_variable_are_bounded_too(tmp_path):
    # Under V-S a noisy field's positions (which element is in which bin) are half its
    # compressed size (200 MB of index for 243 MB of data here). Kept in memory until the
    # index was written, importing grew the process by 408 MB here; spilled with the
    # segments, by 232 MB (under S, noisy: 179 to 188 MB). Read back, every frame of them
    # stayed loaded: the export grew by 252 MB; the last few kept, by 126 MB.
    growth_mb, export_mb, count_mb = static_import(tmp_path, "V-S", noisy=True)
    assert growth_mb < 320, f"peak memory grew by {growth_mb} MB importing a 415 MB static variable under V-S"
    assert export_mb < 200, f"peak memory grew by {export_mb} MB exporting a 415 MB static variable under V-S"
    # A count needs no positions: loading them (64 frames kept), it grew by 62 MB; now 0.
    assert count_mb < 30, f"peak memory grew by {count_mb} MB counting a 415 MB static variable under V-S"


QUERY_SCRIPT = textwrap.dedent(
    """
    import sys
    import pandas  # imported before measuring: its modules are not the query's memory
    import strata

    # No decoded-segment cache: its 64 MiB would count as growth.
    ds = strata.open(sys.argv[1], cache_bytes=0)
    before = reset_peak()
    rows = 0
    for frame in ds.query_batches("field > 0"):
        rows += len(frame)
    growth = kb("VmHWM") - before
    # The same result whole, to show what streaming saved (and that the measure sees it).
    before = reset_peak()
    whole = len(ds.query("field > 0"))
    peak = kb("VmHWM") - before
    print(rows, whole, growth // 1024, peak // 1024)
    """
)


def test_streamed_query_memory_is_bounded_by_pieces(tmp_path):
    import numpy as np

    import strata

    records, ny, nx = 800, 180, 360  # 800 x 180 x 360 f32 = 207 MB
    base = np.sin(np.arange(ny * nx, dtype="f4")).reshape(ny, nx)
    field = np.broadcast_to(base, (records, ny, nx)) + np.arange(records, dtype="f4")[:, None, None] * 1e-3
    store = tmp_path / "q.strata"
    strata.write_arrays(store, {"field": (("time", "y", "x"), field)}, record_dim="time", layout="V-S", bins=8)
    want = int((field > 0).sum())
    del field
    result = subprocess.run([sys.executable, "-c", MEMORY + QUERY_SCRIPT, str(store)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    rows, whole, growth_mb, whole_mb = map(int, result.stdout.split())
    # Half the points: 26M rows of 4 columns (8, 8, 8 and 4 bytes), 728 MB as one DataFrame.
    assert rows == whole == want
    # The sanity check that the measure sees a large result: the whole one peaks near its size.
    assert whole_mb > 600, f"the whole result grew the process by only {whole_mb} MB"
    # Streaming holds a frame being consumed and the next one read ahead (33 records, 1.1 to
    # 1.6M points, 30 to 45 MB each) and the pieces' buffers while they run; glibc's
    # per-thread arenas keep some of what the pieces freed. 306-331 MB was measured here
    # (225 MB with a fixed mmap threshold), against 940-1,075 MB for the whole result.
    # Frames' columns are freed with them: kept for the next frame, as a whole result's
    # are (strata_core::recycle), they held 340-565 MB.
    assert growth_mb < 400, f"peak memory grew by {growth_mb} MB streaming a {whole_mb} MB query result"
    assert whole_mb > 2 * growth_mb, f"streaming grew by {growth_mb} MB, the whole result by {whole_mb} MB"


def _arena_limit(env: dict) -> str:
    code = "from strata import _core; print(_core.malloc_arena_limit())"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_glibc_arenas_are_one_per_core_unless_the_user_chose():
    """Loading strata limits glibc's malloc arenas to the cores the process may use (freed
    query buffers are then found again instead of coming back as fresh zeroed pages); a limit
    the user set through the environment is left as it is."""
    import os
    import platform

    if platform.libc_ver()[0] != "glibc":
        return
    base = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    # The cores it may use: its CPU affinity, or fewer under a cgroup quota.
    assert 1 <= int(_arena_limit(base)) <= len(os.sched_getaffinity(0))
    assert _arena_limit({**base, "MALLOC_ARENA_MAX": "3"}) == "None"
    assert _arena_limit({**base, "GLIBC_TUNABLES": "glibc.malloc.arena_max=3"}) == "None"


def test_glibc_keeps_freed_blocks_unless_the_user_chose():
    """Loading strata fixes glibc's mmap and trim thresholds, so freed blocks of a few MB
    (netCDF's 4 MiB buffers at every open, an import's slab buffers) are found again rather
    than coming back as fresh pages; thresholds the user set are left as they are."""
    import os
    import platform

    if platform.libc_ver()[0] != "glibc":
        return
    code = "from strata import _core; print(_core.malloc_thresholds())"
    keys = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")
    base = {k: v for k, v in os.environ.items() if k not in keys}

    def thresholds(env):
        return subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()

    assert thresholds(base) == str((32 << 20, 16 << 20))
    assert thresholds({**base, "MALLOC_TRIM_THRESHOLD_": "1000000"}) == "None"
    assert thresholds({**base, "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}) == "None"


DASK_STATIC_SCRIPT = textwrap.dedent(
    """
    import sys
    import dask.array as da, numpy as np, xarray as xr
    import strata

    # 4 x 4000 x 5000 f32 = 320 MB, computed lazily; no dimension leads every variable, so
    # the store has no record dimension and one task writes `a` a block at a time.
    y = da.arange(4000, chunks=500, dtype="f4")[:, None]
    x = da.arange(5000, chunks=5000, dtype="f4")[None, :]
    a = (da.sin(y / 100.0) + da.cos(x / 50.0))[None] + da.arange(4, chunks=1, dtype="f4")[:, None, None]
    ds = xr.Dataset({"a": (("m", "y", "x"), a.astype("f4")), "b": (("x", "m"), np.arange(20000.0).reshape(5000, 4))})
    before = reset_peak()
    strata.to_strata(ds, sys.argv[1])
    after = kb("VmHWM")
    got = strata.open(sys.argv[1])
    assert got.manifest["record_dim"] is None
    assert np.array_equal(got["a"][3, 3999], a[3, 3999].compute()), "the last row reads back"
    assert np.array_equal(got["b"][...], ds["b"].values)
    print((after - before) // 1024)
    """
)


def test_dask_writes_a_large_field_without_the_record_dimension_in_bounded_memory(tmp_path):
    args = [str(tmp_path / "dask.strata")]
    result = subprocess.run([sys.executable, "-c", MEMORY + DASK_STATIC_SCRIPT, *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    growth_mb = int(result.stdout.strip().splitlines()[-1])
    # The writer's encoded slab and the file's bytes were both held: 431 MB here. Spilled
    # past 64 MiB and streamed to its file: 224 MB (a block of about a slab computed, its
    # bytes, and up to 64 MiB encoded).
    assert growth_mb < 300, f"peak memory grew by {growth_mb} MB writing a 320 MB field from Dask"
