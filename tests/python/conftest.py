import os
import pathlib
import re
import subprocess
import sys
import time
import warnings

import netCDF4
import numpy as np
import pytest

import strata

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
REAL_FILES = sorted(p.name for p in DATA.glob("*.nc")) if DATA.is_dir() else []

# The crash, race and corruption harnesses (tests/crash) are run by a few tests in small doses.
sys.path.insert(0, str(ROOT / "tests" / "crash"))

needs_data = pytest.mark.skipif(not REAL_FILES, reason=f"real datasets not found in {DATA}")


@pytest.fixture(scope="session")
def imported(tmp_path_factory):
    """Imports a file of ../shared/data once per session and returns the store path."""
    cache: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in cache:
            out = tmp_path_factory.mktemp("stores") / (name + ".strata")
            strata.import_file(DATA / name, out)
            cache[name] = str(out)
        return cache[name]

    return get


def raw_source(path) -> netCDF4.Dataset:
    nc = netCDF4.Dataset(path)
    nc.set_auto_maskandscale(False)
    nc.set_auto_chartostring(False)
    return nc


def assert_bit_equal(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype.kind in "iufS":
        assert got.dtype == want.dtype.newbyteorder("="), f"{what}: dtype {got.dtype} != {want.dtype}"
        want = want.astype(got.dtype)
        assert got.tobytes() == want.tobytes(), f"{what}: values differ"
    else:
        assert got.tolist() == want.tolist(), f"{what}: values differ"


def assert_attr_equal(got, want, what: str = "") -> None:
    if isinstance(want, str | list):
        assert got == want, f"{what}: {got!r} != {want!r}"
        return
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype.newbyteorder("="), f"{what}: type {g.dtype} != {w.dtype}"
    assert g.shape == w.shape or (g.size == w.size == 1), f"{what}: shape {g.shape} != {w.shape}"
    assert g.astype(g.dtype).tobytes() == w.astype(g.dtype).tobytes(), f"{what}: {got!r} != {want!r}"


def make_nc(path, *, times=range(10), nlat=17, nlon=23, seed=0, fmt="NETCDF4", extra_attrs=None):
    """A small CF dataset: time(unlimited) x lat x lon float32 with NaNs, plus coordinates."""
    rng = np.random.default_rng(seed)
    times = list(times)
    with netCDF4.Dataset(path, "w", format=fmt) as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", nlat)
        nc.createDimension("lon", nlon)
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t.calendar = "standard"
        t[:] = np.asarray(times, dtype="f8")
        lat = nc.createVariable("lat", "f4", ("lat",))
        lat.units = "degrees_north"
        lat[:] = np.linspace(-80, 80, nlat)
        lon = nc.createVariable("lon", "f4", ("lon",))
        lon[:] = np.linspace(0, 360, nlon, endpoint=False)
        v = nc.createVariable("temp", "f4", ("time", "lat", "lon"), fill_value=np.float32(-999))
        v.units = "degC"
        for k, val in (extra_attrs or {}).items():
            v.setncattr(k, val)
        data = (rng.normal(15, 8, (len(times), nlat, nlon))).astype("f4")
        data[:, :3, :5] = np.nan
        v[:] = data
        nc.title = "synthetic"
    return path


def quiet():
    return warnings.catch_warnings()


__all__ = ["DATA", "REAL_FILES", "assert_attr_equal", "assert_bit_equal", "make_nc", "needs_data", "raw_source"]
os.environ.setdefault("TQDM_DISABLE", "1")


def start_server(root, log, *extra):
    """`strata serve` on a free loopback port, bounded in requests and time."""
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "strata.cli",
                "serve",
                str(root),
                "--port",
                "0",
                "--max-seconds",
                "600",
                "--max-requests",
                "5000",
                *extra,
            ],
            stderr=err,
        )
    m = None
    for _ in range(300):
        m = re.search(r"(https?)://(127\.0\.0\.1:\d+)/", log.read_text())
        if m or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert m, f"server did not start: {log.read_text()!r}"
    return proc, f"{m.group(1)}://{m.group(2)}"
