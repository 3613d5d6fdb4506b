"""Import streams: peak memory grows with the slab size, not with the file size."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import resource, sys, netCDF4, numpy as np
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
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    strata.import_file(src, out, slab_records=40)   # 40 records = 10 MB slabs
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ds = strata.open(out)
    assert ds["field"].shape == (records, ny, nx)
    assert ds["field"][1599, 0, 1] == base[0, 1] + np.float32(1599)
    print((after - before) // 1024)
    """
)


def test_import_memory_is_bounded_by_slabs_not_file_size(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "big.nc"), str(tmp_path / "big.strata")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    growth_mb = int(result.stdout.strip().splitlines()[-1])
    # The file is 415 MB; holding it would grow the process by at least that much.
    assert growth_mb < 120, f"peak memory grew by {growth_mb} MB while importing a 415 MB file"
