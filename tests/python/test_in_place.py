"""`strata index FILE.nc`: NetCDF-4/HDF5 files indexed in place, read where they lie.

Every variable of every HDF5 file in ../shared/data reads back bit-exact against
netCDF4-python; value queries and SQL on the index equal NumPy; the server serves the
index beside stores (DAP2 with netCDF4-python, value queries over HTTP); a changed file is
refused, never read wrong; what cannot be read in place is refused with a clear error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import h5py
import netCDF4
import numpy as np
import pytest

import strata
from conftest import DATA, REAL_FILES, assert_bit_equal, needs_data, raw_source, start_server
from strata.errors import CompatibilityError, CorruptionError, InvalidArgumentError

ERSST = "ersst_v3b_1960-2016_concat.nc"
HDF5_FILES = [f for f in REAL_FILES if h5py.is_hdf5(DATA / f)]


def beside(tmp_path, name: str, copy: bool = False):
    """The real file in tmp_path (linked, or copied when the test changes it)."""
    path = tmp_path / name
    if copy:
        shutil.copyfile(DATA / name, path)
    else:
        os.symlink(DATA / name, path)
    return path


@needs_data
@pytest.mark.parametrize("name", HDF5_FILES)
def test_every_variable_reads_back_bit_exact(tmp_path, name):
    path = beside(tmp_path, name)
    report = strata.index_file(path)
    assert report.index == f"{path}.strata" and report.version == 1
    # The index holds no data: a few kB per MB of file.
    assert report.index_bytes < os.path.getsize(path) / 50 + 200_000
    ds = strata.open(report.index)
    with raw_source(path) as nc:
        for vname, var in nc.variables.items():
            if var.dtype is str:
                assert list(ds[vname][...].ravel()) == list(np.asarray(var[...], dtype=object).ravel())
                continue
            assert_bit_equal(ds[vname][...], var[...], f"{name}:{vname}")
            assert ds[vname].attrs.keys() == set(var.ncattrs())


@needs_data
def test_value_queries_and_sql_equal_numpy_and_skip_chunks(tmp_path):
    path = beside(tmp_path, ERSST)
    strata.index_file(path, tmp_path / "ersst")
    ds = strata.open(tmp_path / "ersst")
    with raw_source(path) as nc:
        sst = nc["sst"][...]
        lat = nc["lat"][...]
    valid = sst != -999
    for where, want in [("sst > 25", (sst > 25) & valid), ("sst > 31", (sst > 31) & valid)]:
        count, stats = ds.query(where, output="count", with_stats=True, method="index")
        assert count == int(want.sum())
        assert ds.query(where, output="count", method="scan") == int(want.sum())
    # Chunks whose summary excludes the predicate are never read (by the index method; the
    # cost model may pick a scan when it estimates that cheaper).
    assert stats["empty"] > stats["subchunks"] / 2
    # With boundaries as bins, a query whose bound is a boundary never reads the file.
    strata.index_file(path, tmp_path / "binned", binning="-1.5,0,10,20,25,28,30")
    binned = strata.open(tmp_path / "binned")
    for where, want in [("sst >= 25", (sst >= 25) & valid), ("sst < 0", (sst < 0) & valid)]:
        count, stats = binned.query(where, output="count", with_stats=True, method="index")
        assert count == int(want.sum()) and stats["boundary"] == 0 and stats["full"] > 0
        assert "0 B read" in stats["explain"]
    count, stats = binned.query("sst > 26.3", output="count", with_stats=True, method="index")
    assert count == int(((sst > 26.3) & valid).sum()) and stats["boundary"] > 0
    for d in (ds, binned):
        pos = d.query("sst > 30", isel={"time": slice(100, 200)}, output="positions")
        t, la, lo = np.nonzero((sst[100:200] > 30) & valid[100:200])
        np.testing.assert_array_equal(np.asarray(pos[0]), t + 100)
        np.testing.assert_array_equal(np.asarray(pos[1]), la)
        np.testing.assert_array_equal(np.asarray(pos[2]), lo)
        assert_bit_equal(d["sst"][...], sst)
    pos = ds.query("sst > 30", isel={"time": slice(100, 200)}, output="positions")
    t, la, lo = np.nonzero((sst[100:200] > 30) & valid[100:200])
    np.testing.assert_array_equal(np.asarray(pos[0]), t + 100)
    np.testing.assert_array_equal(np.asarray(pos[1]), la)
    np.testing.assert_array_equal(np.asarray(pos[2]), lo)
    rows = strata.sql(tmp_path / "ersst", "SELECT count(*) AS n FROM ersst WHERE sst > 28 AND lat > 0").to_pylist()
    want = int(((sst > 28) & valid & (lat > 0)[None, :, None]).sum())
    assert rows[0]["n"] == want


def write_awkward(path):
    """Big-endian, fletcher32 + shuffle + deflate, ragged edge chunks, chunks never written
    (they read as the fill value), a contiguous big-endian coordinate and a scalar."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("t", None)
        nc.createDimension("y", 13)
        nc.createDimension("x", 11)
        y = nc.createVariable("y", ">f8", ("y",), endian="big")
        y[:] = np.linspace(-60, 60, 13)
        s = nc.createVariable("scale", "i4", ())
        s.assignValue(7)
        v = nc.createVariable(
            "v",
            ">f4",
            ("t", "y", "x"),
            endian="big",
            zlib=True,
            shuffle=True,
            fletcher32=True,
            chunksizes=(2, 5, 4),
            fill_value=-1.5,
        )
        v.units = "K"
        rng = np.random.default_rng(3)
        data = rng.normal(280, 10, (7, 13, 11)).astype("f4")
        v[0:7, :, :] = data
        # Only the top-left corner of records 7..9: the other chunks stay unwritten.
        v[7:10, 0:5, 0:4] = data[:3, 0:5, 0:4]
        i = nc.createVariable("count", "<i2", ("t", "y"), chunksizes=(3, 13))
        i[0:10, :] = np.arange(130, dtype="i2").reshape(10, 13)


def test_awkward_hdf5_storage_reads_back_exactly(tmp_path):
    path = tmp_path / "awkward.nc"
    write_awkward(path)
    report = strata.index_file(path)
    ds = strata.open(report.index)
    with raw_source(path) as nc:
        for name in ["y", "scale", "v", "count"]:
            assert_bit_equal(ds[name][...], nc[name][...], name)
        v = nc["v"][...]
    assert (v[8:] == -1.5).any()  # the fill of the chunks never written came back
    assert ds.query("v > 290", output="count") == int(((v > 290) & (v != -1.5)).sum())
    # The same with value bins (chunks never written hold only the fill: the missing bin).
    binned = strata.open(strata.index_file(path, tmp_path / "binned", binning="275,285").index)
    with raw_source(path) as nc:
        for name in ["y", "scale", "v", "count"]:
            assert_bit_equal(binned[name][...], nc[name][...], name)
    valid = v[v != -1.5]
    for where, want in [("v >= 285", valid >= 285), ("v > 290", valid > 290), ("v < 275", valid < 275)]:
        assert binned.query(where, output="count") == int(want.sum()), where
    manifest = json.loads((tmp_path / "awkward.nc.strata" / "manifests" / "v00000001.json").read_text())
    chains = {v["name"]: [c[0]["name"] for c in v["codecs"]] for v in manifest["variables"] if "codecs" in v}
    assert chains["v"] == ["hdf5", "fill"] and chains["y"] == ["hdf5"]


def test_damage_and_changes_are_refused_never_read_wrong(tmp_path):
    path = tmp_path / "awkward.nc"
    write_awkward(path)
    index = strata.index_file(path).index
    ds = strata.open(index)
    # Damage on disk (a byte of v's first chunk, the file's time kept): the read touching it
    # fails naming the file; chunks not touched still read.
    with h5py.File(path) as h5:
        info = h5["v"].id.get_chunk_info_by_coord((0, 0, 0))
    stat = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(info.byte_offset + info.size // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(CorruptionError, match=r"awkward\.nc"):
        ds["v"][0:2, 0:5, 0:4]
    with raw_source(path) as nc:
        assert_bit_equal(ds["v"][2:4, 5:10, 4:8], nc["v"][2:4, 5:10, 4:8])
    verify = subprocess.run([sys.executable, "-m", "strata.cli", "verify", index], capture_output=True, text=True)
    assert verify.returncode != 0 and "checksum" in verify.stdout + verify.stderr

    # A file changed by a program (new values written through netCDF): refused as a whole,
    # before any chunk is read, until it is indexed again (a new version).
    write_awkward(path)
    with netCDF4.Dataset(path, "a") as nc:
        nc["count"][0, :] = 999
    with pytest.raises(CorruptionError, match="changed since it was indexed"):
        strata.open(index)["count"][...]
    assert strata.index_file(path).version == 2
    with raw_source(path) as nc:
        assert_bit_equal(strata.open(index)["count"][...], nc["count"][...])
        assert_bit_equal(strata.open(index)["v"][...], nc["v"][...])
    # A copy (new time, same bytes) still reads: the whole file's checksum is the same.
    shutil.copyfile(path, tmp_path / "copy.nc")
    os.replace(tmp_path / "copy.nc", path)
    with raw_source(path) as nc:
        assert_bit_equal(strata.open(index)["v"][...], nc["v"][...])
    # Cut short: refused.
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 10)
    with pytest.raises(CorruptionError, match="changed since it was indexed"):
        strata.open(index)["y"][...]


def test_what_cannot_be_read_in_place_is_refused_clearly(tmp_path):
    classic = tmp_path / "classic.nc"
    with netCDF4.Dataset(classic, "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("x", 3)
        nc.createVariable("a", "f4", ("x",))[:] = [1, 2, 3]
    with pytest.raises(CompatibilityError, match="NetCDF-4/HDF5"):
        strata.index_file(classic)
    lzf = tmp_path / "lzf.h5"
    with h5py.File(lzf, "w") as h5:
        h5.create_dataset("a", data=np.arange(1000.0), chunks=(100,), compression="lzf")
    with pytest.raises(CompatibilityError, match="lzf"):
        strata.index_file(lzf)
    compact = tmp_path / "compact.h5"
    with h5py.File(compact, "w") as h5:
        space = h5py.h5s.create_simple((4,))
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_layout(h5py.h5d.COMPACT)
        h5py.h5d.create(h5.id, b"a", h5py.h5t.NATIVE_DOUBLE, space, plist)
    with pytest.raises(CompatibilityError, match="compact"):
        strata.index_file(compact)
    # The index must sit beside the file, and is read-only.
    path = tmp_path / "awkward.nc"
    write_awkward(path)
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(InvalidArgumentError, match="beside"):
        strata.index_file(path, tmp_path / "elsewhere" / "idx")
    index = strata.index_file(path).index
    with pytest.raises(InvalidArgumentError, match="read-only"):
        strata.append_file(path, index)
    # Not into a directory that holds something else.
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(InvalidArgumentError, match="not empty"):
        strata.index_file(path, tmp_path / "busy")
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"


def test_cli_index_prints_what_it_did(tmp_path):
    path = tmp_path / "awkward.nc"
    write_awkward(path)
    out = subprocess.run(
        [sys.executable, "-m", "strata.cli", "index", "-q", str(path)], capture_output=True, text=True, check=True
    ).stdout
    assert "indexed" in out and "awkward.nc.strata" in out and "chunks" in out
    help_text = subprocess.run(
        [sys.executable, "-m", "strata.cli", "index", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "NetCDF-4/HDF5" in help_text and "strata import" in help_text


@needs_data
def test_the_server_serves_an_index_beside_stores(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    shutil.copyfile(DATA / ERSST, root / "ersst.nc")
    strata.index_file(root / "ersst.nc", root / "ersst")
    # An index served as the root itself would read a file outside the root: refused.
    proc, base = start_server(root, tmp_path / "server.log")
    try:
        with raw_source(root / "ersst.nc") as nc:
            sst = nc["sst"][...]
        with netCDF4.Dataset(f"{base}/dap/ersst") as remote:
            remote.set_auto_maskandscale(False)
            assert_bit_equal(remote["sst"][10:20:3, 5:40, 100:150], sst[10:20:3, 5:40, 100:150])
        q = urllib.parse.urlencode({"where": "sst > 29", "isel": "time=0:120"})
        with urllib.request.urlopen(f"{base}/api/query/ersst?{q}", timeout=60) as r:
            assert json.loads(r.read())["count"] == int(((sst[:120] > 29) & (sst[:120] != -999)).sum())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    proc, base = start_server(root / "ersst", tmp_path / "server2.log")
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{base}/dap/ersst.dds", timeout=60)
        assert e.value.code == 404 and "not inside the served directory" in e.value.read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_groups_are_indexed_in_place_under_their_paths(tmp_path):
    path = tmp_path / "grouped.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 5)
        ocean = nc.createGroup("ocean")
        ocean.createDimension("depth", 3)
        t = ocean.createVariable("temp", "f4", ("depth", "x"), zlib=True, chunksizes=(2, 5))
        t[:] = np.arange(15, dtype="f4").reshape(3, 5)
        ocean.note = "nested"
    ds = strata.open(strata.index_file(path).index)
    assert ds["ocean/temp"].dims == ("ocean/depth", "x") and ds.attrs["ocean/note"] == "nested"
    assert_bit_equal(ds["ocean/temp"][...], np.arange(15, dtype="f4").reshape(3, 5))
    assert ds.query('"ocean/temp" >= 7', output="count") == 8
