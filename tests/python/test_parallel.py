"""Parallel writers: threads, MPI ranks and Dask tasks write one store; it reads back
bit-exact against the source in every placement."""

import os
import pathlib
import shutil
import subprocess
import sys

import netCDF4
import numpy as np
import pytest
import xarray as xr

import strata
import strata.parallel as sp
from conftest import DATA, needs_data

ERSST = DATA / "ersst_v3b_1960-2016_concat.nc"
PROGRAMS = pathlib.Path(__file__).parent / "programs"


@pytest.fixture(scope="module")
def source():
    with netCDF4.Dataset(ERSST) as nc:
        nc.set_auto_maskandscale(False)
        return {name: nc[name][:] for name in ("time", "lat", "lon", "sst")}


def assert_same(path, source):
    ds = strata.open(path)
    for name, values in source.items():
        got = ds[name][:]
        assert got.dtype == values.dtype and got.tobytes() == values.tobytes(), name
    problems = strata._core.verify(str(path), None, True)[4]
    assert problems == [], problems


DIMS = {"time": None, "lat": 89, "lon": 180}
VARIABLES = {"time": ("i8", "time"), "lat": ("f4", "lat"), "lon": ("f4", "lon"), "sst": ("f4", ("time", "lat", "lon"))}
BLOCKS = [{"lat": (y0, y1), "lon": (x0, x1)} for y0, y1 in [(0, 45), (45, 89)] for x0, x1 in [(0, 90), (90, 180)]]


def block_work(source, blocks):
    def work(w, rank):
        (y0, y1), (x0, x1) = blocks[rank]["lat"], blocks[rank]["lon"]
        if x0 == 0:
            w.write("lat", source["lat"][y0:y1])
        if y0 == 0:
            w.write("lon", source["lon"][x0:x1])
        for t in range(len(source["time"])):
            step = {"sst": source["sst"][t, y0:y1, x0:x1]}
            if x0 == 0 and y0 == 0:
                step["time"] = source["time"][t]
            w.append(step)

    return work


@needs_data
@pytest.mark.parametrize("placement", ["dense", "hybrid"])
@pytest.mark.parametrize("layout", ["S", "M-S"])
def test_threads_write_blocks_of_a_real_series(tmp_path, source, placement, layout):
    version = sp.write_threads(
        tmp_path / "s",
        DIMS,
        VARIABLES,
        BLOCKS,
        block_work(source, BLOCKS),
        placement=placement,
        layout=layout,
        slab_records=60,
        codec="auto",
    )
    assert version == 1
    assert_same(tmp_path / "s", source)
    m = strata.open(tmp_path / "s").manifest
    assert len(m["slabs"]) == 1 + 12  # the fixed variables, then 684 records in slabs of 60
    chunk = strata.open(tmp_path / "s")["sst"].chunks
    assert 45 % chunk[1] == 0 and 90 % chunk[2] == 0  # chunks cut to fit the blocks


@needs_data
def test_threads_write_record_ranges_as_subfiles(tmp_path, source):
    ranges = [{"time": (0, 240)}, {"time": (240, 480)}, {"time": (480, 684)}]

    def work(w, rank):
        t0, t1 = ranges[rank]["time"]
        if rank == 0:
            w.write("lat", source["lat"])
            w.write("lon", source["lon"])
        for t in range(t0, t1, 12):  # a year at a time
            w.append(time=source["time"][t : t + 12], sst=source["sst"][t : t + 12])

    assert sp.write_threads(tmp_path / "s", DIMS, VARIABLES, ranges, work, placement="subfiles") == 1
    assert_same(tmp_path / "s", source)
    data_files = [f["path"] for f in strata.open(tmp_path / "s").manifest["files"] if f["path"].endswith(".sdat")]
    assert {p.split("-w")[-1].split(".")[0] for p in data_files if "-w" in p} == {"0", "1", "2"}


def test_a_failing_writer_fails_the_write_and_commits_nothing(tmp_path):
    dims = {"t": None, "x": 8}
    variables = {"v": ("f4", ("t", "x"))}
    blocks = [{"x": (0, 4)}, {"x": (4, 8)}]

    def work(w, rank):
        for t in range(20):
            if rank == 1 and t == 13:
                raise RuntimeError("the model diverged")
            w.append(v=np.full(4, t, dtype="f4"))

    with pytest.raises(RuntimeError, match="the model diverged"):
        sp.write_threads(tmp_path / "s", dims, variables, blocks, work, slab_records=4)
    with pytest.raises(strata.NotFoundError):
        strata.open(tmp_path / "s")

    def wrong_shape(w, rank):
        w.append(v=np.zeros(5 if rank else 4, dtype="f4"))

    with pytest.raises(strata.InvalidArgumentError, match=r"records have shape \(4,\)"):
        sp.write_threads(tmp_path / "t", dims, variables, blocks, wrong_shape)
    overlapping = [{"x": (0, 5)}, {"x": (4, 8)}]
    with pytest.raises(strata.InvalidArgumentError, match="overlap"):
        sp.write_threads(tmp_path / "u", dims, variables, overlapping, lambda w, r: None)
    with pytest.raises(strata.InvalidArgumentError, match="unknown placement"):
        sp.write_threads(tmp_path / "u", dims, variables, blocks, lambda w, r: None, placement="striped")


def mpirun(n, placement, out):
    env = dict(
        os.environ,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
    )
    cmd = [
        "mpirun",
        "--oversubscribe",
        "-n",
        str(n),
        sys.executable,
        "-m",
        "mpi4py",
        str(PROGRAMS / "mpi_write.py"),
        str(ERSST),
        str(out),
        placement,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


needs_mpi = pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed")


@needs_data
@needs_mpi
@pytest.mark.parametrize(("ranks", "placement"), [(2, "dense"), (2, "subfiles"), (4, "hybrid"), (4, "dense")])
def test_mpi_ranks_write_one_store(tmp_path, source, ranks, placement):
    result = mpirun(ranks, placement, tmp_path / "s")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"committed version 1 with {ranks} writers ({placement})" in result.stdout
    assert_same(tmp_path / "s", source)
    assert strata.open(tmp_path / "s").attrs["title"] == "ERSST by blocks"


@needs_data
def test_dask_tasks_on_a_local_cluster_write_one_store(tmp_path):
    distributed = pytest.importorskip("distributed")
    ds = xr.open_dataset(ERSST, chunks={"time": 120})
    with (
        # Workers' scratch space under the test's directory, not a shared one in /tmp.
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            local_directory=tmp_path / "dask",
        ) as c,
        distributed.Client(c) as client,
    ):
        assert len(client.scheduler_info()["workers"]) == 2
        assert ds.strata.to_store(tmp_path / "s", codec="auto") == 1
    with xr.open_dataset(ERSST) as src, xr.open_dataset(tmp_path / "s", engine="strata") as got:
        xr.testing.assert_identical(got.load(), src.load())
    m = strata.open(tmp_path / "s").manifest
    assert m["slab_records"] == 120 and len(m["slabs"]) == 1 + 6
    assert strata.open(tmp_path / "s")["sst"].plan is not None  # planned by the tasks


@needs_data
@pytest.mark.parametrize(
    "name", ["wrf_katrina_ci_test_file.nc", "vmec_wout_n3are_R7.75B5.7.nc", "trefht_B06_8member_ensemble_1890-1999.nc"]
)
def test_dask_writes_real_datasets_as_xarray_reads_them(tmp_path, name):
    # WRF: char Times along the record dimension, 2-D XLAT/XLONG named by `coordinates`, and
    # XTIME, which xarray's lazy encoding declares float32 but computes as float64. VMEC:
    # scalars, char scalars, and dimensions that lead some variables and not others. CCSM:
    # NetCDF-4 strings.
    with xr.open_dataset(DATA / name, chunks={}) as ds:
        assert strata.to_strata(ds, tmp_path / "s") == 1
    with xr.open_dataset(DATA / name) as want:
        xr.testing.assert_identical(strata.open(tmp_path / "s").to_xarray(), want)
    if name.startswith("wrf"):
        # The coordinates link survives: an area through XLAT is answered.
        got = strata.open(tmp_path / "s").query("T2 > 300", sel={"XLAT": (25, 30)}, output="count")
        with xr.open_dataset(DATA / name) as d:
            assert got == int(((d.T2 > 300) & (d.XLAT >= 25) & (d.XLAT <= 30)).sum())


def test_to_strata_keeps_dimension_order_and_text(tmp_path):
    ds = xr.Dataset(
        {
            "v": (("x", "t"), np.arange(6.0).reshape(2, 3)),
            "w": (("t", "x"), np.arange(6.0).reshape(3, 2)),
            "name": (("x",), np.array(["Oslo", "Tromsø"], dtype=object)),
        }
    )
    with pytest.raises(strata.InvalidArgumentError, match="must come first"):
        strata.to_strata(ds, tmp_path / "a", record_dim="t")
    assert strata.to_strata(ds, tmp_path / "b") == 1
    xr.testing.assert_identical(strata.open(tmp_path / "b").to_xarray(), ds)
    # Single bytes as Python objects are characters, read back as such.
    flags = xr.Dataset({"flag": (("x",), np.array([b"y", b"n"], dtype=object))})
    assert strata.to_strata(flags, tmp_path / "f") == 1
    assert strata.open(tmp_path / "f").to_xarray()["flag"].values.tolist() == [b"y", b"n"]
    bad = xr.Dataset({"o": (("n",), np.array([{"a": 1}, "x"], dtype=object))})
    with pytest.raises(strata.InvalidArgumentError, match="not all text"):
        strata.to_strata(bad, tmp_path / "c")


def test_to_strata_without_dask_chunks(tmp_path):
    ds = xr.Dataset({"v": (("t", "x"), np.arange(12.0).reshape(4, 3))}, coords={"x": [1, 2, 3]})
    assert strata.to_strata(ds, tmp_path / "s") == 1
    with xr.open_dataset(tmp_path / "s", engine="strata") as got:
        xr.testing.assert_identical(got.load(), ds)


def test_to_strata_writes_a_large_variable_without_records_in_blocks(tmp_path):
    # No dimension leads every variable, so there is no record dimension: one task writes
    # the fixed variables, the 80 MB field a block of chunks at a time (about 64 MiB each),
    # each block computed in the task, not the whole array as the task's argument.
    da = pytest.importorskip("dask.array")
    y = da.arange(4000, chunks=500, dtype="f4")[:, None]
    x = da.arange(5000, chunks=5000, dtype="f4")[None, :]
    field = (da.sin(y / 100.0) + da.cos(x / 50.0))[None] + da.arange(1, chunks=1, dtype="f4")[:, None, None]
    ds = xr.Dataset({"a": (("m", "y", "x"), field), "b": (("x", "m"), np.arange(5000.0).reshape(5000, 1))})
    assert strata.to_strata(ds, tmp_path / "s") == 1
    got = strata.open(tmp_path / "s")
    assert got.manifest["record_dim"] is None
    assert np.array_equal(got["a"][...], field.compute())
    assert np.array_equal(got["b"][...], ds["b"].values)
