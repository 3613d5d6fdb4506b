"""strata serve, tested with real clients: netCDF4-python and ncdump over DAP2, pydap, and
plain HTTP for the JSON, Arrow and SQL routes. Every answer is checked against NumPy on the
same selection of the source file. The server listens on 127.0.0.1 on a free port and stops
by itself after a bounded number of requests or seconds."""

from __future__ import annotations

import concurrent.futures as cf
import io
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings

import netCDF4
import numpy as np
import pyarrow as pa
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strata
from conftest import DATA, needs_data, start_server

pytestmark = needs_data

ERSST = "ersst_v3b_1960-2016_concat.nc"
SIC = "sic_SImon_CCCma-CanESM5_ssp245_r13i1p2f1_2020.nc"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Two stores (one nested in a folder) served by `strata serve` on a free port."""
    root = tmp_path_factory.mktemp("served")
    strata.import_file(DATA / ERSST, root / "ersst")
    (root / "ocean").mkdir()
    strata.import_file(DATA / SIC, root / "ocean" / "sic")
    # Something that is not a store, and a file outside the root a request must not reach.
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("not a store")
    proc, base = start_server(root, root.parent / "server.log")
    yield base, root
    proc.terminate()
    proc.wait(timeout=30)


def get(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, dict, bytes]:
    h = dict(headers or {})
    if data:
        h["content-type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


@pytest.fixture(scope="module")
def source():
    with netCDF4.Dataset(DATA / ERSST) as nc:
        nc.set_auto_mask(False)
        yield {name: nc[name][:] for name in ("sst", "lat", "lon", "time")}


def test_health_and_catalog(served):
    base, _ = served
    status, _, body = get(f"{base}/health")
    assert status == 200 and json.loads(body)["datasets"] == 2
    names = [d["name"] for d in json.loads(get(f"{base}/api/datasets")[2])["datasets"]]
    assert names == ["ersst", "ocean/sic"]


def test_every_dataset_shares_one_budget_of_indexes(served):
    """The slab indexes and positions the readers of all datasets load are kept in one
    budget each, reported by /health, whatever the number of datasets read."""
    base, _ = served
    for url in (f"{base}/dap/ersst.dods?sst[0:1:99][0:1:88][0:1:179]", f"{base}/dap/ocean/sic.dods?siconc"):
        status, _, body = get(url)
        assert status == 200 and len(body) > 1 << 20
    held = json.loads(get(f"{base}/health")[2])["cache_bytes"]
    assert set(held) == {"indexes", "positions"}
    assert 0 < held["indexes"] <= 256 << 20 and held["positions"] <= 64 << 20, held


def test_netcdf4_python_subsets_at_the_server(served, source):
    base, _ = served
    with netCDF4.Dataset(f"{base}/dap/ersst") as ds:
        ds.set_auto_mask(False)
        assert ds.dimensions["time"].size == 684
        assert ds["sst"].units == "degree_Celsius"
        for key in [
            (slice(5, 8), slice(10, 20, 3), slice(None, None, 7)),
            (0, slice(None), slice(None)),
            (slice(600, 684, 9), 44, slice(100, 180)),
        ]:
            got = ds["sst"][key]
            np.testing.assert_array_equal(got, source["sst"][key])
        np.testing.assert_array_equal(ds["time"][:], source["time"])
        np.testing.assert_array_equal(ds["lat"][::4], source["lat"][::4])


def test_ncdump_reads_header_and_constrained_values(served, source):
    base, _ = served
    ncdump = shutil.which("ncdump")
    assert ncdump, "ncdump (Debian's netcdf-bin) is installed by make setup"
    head = subprocess.run([ncdump, "-h", f"{base}/dap/ersst"], capture_output=True, text=True, timeout=60)
    assert head.returncode == 0, head.stderr
    assert "float sst(time, lat, lon)" in head.stdout and "time = 684" in head.stdout
    out = subprocess.run(
        [ncdump, "-v", "lat", f"{base}/dap/ersst?lat[10:2:20]"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    values = out.stdout.split("lat =")[-1].split(";")[0]
    got = np.array([float(x) for x in values.split(",")])
    np.testing.assert_array_equal(got, source["lat"][10:21:2])


def test_pydap_subsets_at_the_server(served, source):
    from pydap.client import open_url

    base, _ = served
    ds = open_url(f"{base}/dap/ersst", protocol="dap2")
    assert list(ds.keys()) == ["sst", "lat", "lon", "time"]
    got = np.asarray(ds["sst"][100:103, 30:60:5, 7].data)
    np.testing.assert_array_equal(got, source["sst"][100:103, 30:60:5, 7:8])
    assert ds["sst"].attributes["long_name"].startswith("Extended reconstructed")


def test_clients_see_every_attribute_as_the_file_names_it(served):
    """netCDF4-python and pydap over DAP2 name and value each attribute of ERSST as the file
    does, `iridl:hasSemantics` (a colon inside the name) included."""
    from pydap.client import open_url

    base, _ = served
    remote = open_url(f"{base}/dap/ersst", protocol="dap2")
    with netCDF4.Dataset(DATA / ERSST) as src, netCDF4.Dataset(f"{base}/dap/ersst") as ds:
        assert "iridl:hasSemantics" in src["sst"].ncattrs()
        for name in ("sst", "lat", "lon"):
            want = {a: src[name].getncattr(a) for a in src[name].ncattrs()}
            assert set(ds[name].ncattrs()) == set(want), name
            assert set(remote[name].attributes) == set(want), name
            for a, v in want.items():
                np.testing.assert_array_equal(ds[name].getncattr(a), v, err_msg=f"{name}.{a}")
                np.testing.assert_array_equal(remote[name].attributes[a], v, err_msg=f"{name}.{a} (pydap)")


def test_dods_separator_suits_the_client(served, source):
    """netCDF's DAP2 library (User-Agent oc...) gets `Data:` with CRLF, which it finds without
    searching the whole response; everyone else the standard's LF, which pydap splits on.
    The data after it are the same bytes."""
    base, _ = served
    url = f"{base}/dap/ersst.dods?sst[5:7][10:12][20:23]"
    bodies = {}
    for agent, mark in (("oc4.9.0", b"\nData:\r\n"), ("pydap/3.5.9", b"\nData:\n"), (None, b"\nData:\n")):
        status, headers, body = get(url, headers={"User-Agent": agent} if agent else None)
        vary = {k.lower(): v for k, v in headers.items()}.get("vary", "")
        assert status == 200 and vary.lower() == "user-agent"
        dds, sep, data = body.partition(mark)
        assert sep and dds.startswith(b"Dataset {") and b"Data:" not in dds
        bodies[agent] = data
    assert bodies["oc4.9.0"] == bodies["pydap/3.5.9"] == bodies[None]
    n = int.from_bytes(bodies[None][:4], "big")
    np.testing.assert_array_equal(
        np.frombuffer(bodies[None][8 : 8 + 4 * n], ">f4"), source["sst"][5:8, 10:13, 20:24].ravel()
    )


def test_dods_answers_carry_their_exact_length(tmp_path):
    """A `.dods` answer's Content-Length is its body's length (bytes padded to four, 16-bit
    integers widened, 64-bit ones as doubles), so a client sees an answer cut short; netCDF's
    client reads the same values through it."""
    rng = np.random.default_rng(3)
    flags = rng.integers(-128, 127, (3, 5), dtype="i1")
    arrays = {
        "b": (("y", "x"), rng.integers(0, 255, (3, 5), dtype="u1")),
        "s": (("y", "x"), rng.integers(-128, 127, (3, 5), dtype="i1")),
        "d": (("y", "x"), rng.normal(size=(3, 5))),
        "n": (("x",), np.arange(5, dtype="i8")),
        # NetCDF-3's unsigned bytes: signed storage, flagged.
        "q": (("y", "x"), flags, {"_Unsigned": "true", "_FillValue": np.int8(-1)}),
    }
    strata.write_arrays(tmp_path / "root" / "small", arrays)
    proc, base = start_server(tmp_path / "root", tmp_path / "server.log")
    try:
        for ce in ("b", "b[1][0:2:4]", "b[0:1][1:3],s", "s[2][1:4],d,n[1:3]", "d&d%3E0", "q[0:2][1:4]", ""):
            for agent in ("oc4.9.0", "pydap/3.5.9"):
                status, headers, body = get(f"{base}/dap/small.dods?{ce}", headers={"User-Agent": agent})
                length = {k.lower(): v for k, v in headers.items()}.get("content-length")
                assert status == 200 and length is not None and int(length) == len(body), (ce, agent)
        # Bytes read back unsigned (DAP2's Byte is, netCDF's client needs telling), and
        # flagged signed bytes as the unsigned values they stand for, the fill included.
        want = {name: spec[1] for name, spec in arrays.items()}
        want["q"] = flags.view("u1")
        with netCDF4.Dataset(f"{base}/dap/small") as nc:
            nc.set_auto_mask(False)
            for name, arr in want.items():
                np.testing.assert_array_equal(nc[name][...], arr, err_msg=name)
            assert nc["q"].getncattr("_FillValue") == -1 and nc["q"][...].dtype == np.uint8
        # A selection on them compares the unsigned values the client reads; the others
        # come back as the fill (stored -1, read 255).
        # (Raw: netCDF's client sends a selection with every fetch, and the other arrays on
        # these dimensions have no fill to mark with.)
        u = flags.view("u1")
        status, _, body = get(f"{base}/dap/small.dods?q&q%3E200", headers={"User-Agent": "pydap/3.5.9"})
        data = body.split(b"\nData:\n", 1)[1]
        n = int.from_bytes(data[:4], "big")
        assert status == 200 and n == u.size
        np.testing.assert_array_equal(
            np.frombuffer(data[8 : 8 + n], "u1"), np.where((u > 200) & (u != 255), u, 255).ravel()
        )
        from pydap.client import open_url

        ds = open_url(f"{base}/dap/small", protocol="dap2")
        np.testing.assert_array_equal(np.asarray(ds["b"][:].data), want["b"])
        np.testing.assert_array_equal(np.asarray(ds["q"][:].data), want["q"])
        assert "_Unsigned" in ds["b"].attributes
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_small_dods_over_a_damaged_segment_is_an_error_status(tmp_path):
    """A `.dods` small enough to be made whole before it is sent reports a damaged segment
    as a DAP2 error with status 500 (naming no internals; the log names the file), not as a
    200 whose body breaks off; the server answers on."""
    strata.write_arrays(tmp_path / "root" / "small", {"d": (("y", "x"), np.arange(1500.0).reshape(30, 50))})
    (data,) = (tmp_path / "root" / "small" / "data").glob("*.sdat")
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))
    proc, base = start_server(tmp_path / "root", tmp_path / "server.log")
    try:
        status, headers, body = get(f"{base}/dap/small.dods?d", headers={"User-Agent": "oc4.9.0"})
        assert status == 500 and headers["content-description"] == "dods-error", (status, body)
        assert b"Error {" in body and b".sdat" not in body
        status, _, _ = get(f"{base}/dap/small.dds")
        assert status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "fails its checksum" in (tmp_path / "server.log").read_text()


def test_a_server_whose_log_is_gone_still_answers(tmp_path):
    """`strata serve DIR 2>&1 | head`: once the reader of the log exits, log lines are lost,
    not answers (writing them used to panic in every request, so the server answered
    nothing while it ran on)."""
    arrays = {"v": (("x",), np.arange(40, dtype="f4"))}
    strata.write_arrays(tmp_path / "root" / "small", arrays)
    proc = subprocess.Popen(
        [sys.executable, "-m", "strata.cli", "serve", str(tmp_path / "root"), "--port", "0", "--max-seconds", "120"],
        stderr=subprocess.PIPE,
    )
    try:
        first = proc.stderr.readline().decode()
        m = re.search(r"http://127\.0\.0\.1:\d+", first)
        assert m, first
        proc.stderr.close()  # the log's reader is gone
        for _ in range(3):
            status, _, body = get(f"{m.group(0)}/dap/small.ascii?v[2:1:4]")
            assert status == 200 and body.rstrip().endswith(b"2, 3, 4"), body
        status, _, body = get(f"{m.group(0)}/dap/small.dods?nothing")
        assert status == 404 and b"nothing" in body
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_nested_dataset_over_dap(served):
    base, _ = served
    with netCDF4.Dataset(f"{base}/dap/ocean/sic") as ds, netCDF4.Dataset(DATA / SIC) as src:
        ds.set_auto_mask(False)
        src.set_auto_mask(False)
        np.testing.assert_array_equal(ds["siconc"][3, 200:, ::2], src["siconc"][3, 200:, ::2])
        np.testing.assert_array_equal(ds["latitude"][::10, ::10], src["latitude"][::10, ::10])


def test_value_selection_fills_where_it_does_not_hold(served, source):
    base, _ = served
    ce = "sst[0:1][20:60][0:179],lat&sst>25&sst<=28"  # netCDF-C escapes the URL itself
    with netCDF4.Dataset(f"{base}/dap/ersst?{ce}") as ds:
        ds.set_auto_mask(False)
        got = ds["sst"][:]
        lat = ds["lat"][:]
    want = source["sst"][0:2, 20:61, :]
    want = np.where((want > 25) & (want <= 28) & (want != -999), want, np.float32(-999))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(lat, source["lat"])  # other dimensions: untouched


def test_dap_selection_on_a_2d_latitude_is_an_area(served):
    """`&latitude>=60` on CanESM5's curvilinear grid: the engine's area mask over every
    array the coordinate spans, fill outside it; with a value selection, both hold."""
    base, _ = served
    with netCDF4.Dataset(DATA / SIC) as src:
        src.set_auto_mask(False)
        c, lat = src["siconc"][:], src["latitude"][:]
        fill = np.float32(src["siconc"]._FillValue)
    ce = "siconc[0:2][100:290][0:359],latitude[100:290][0:359]&latitude>=60"
    with netCDF4.Dataset(f"{base}/dap/ocean/sic?{ce}") as ds:
        ds.set_auto_mask(False)
        got, got_lat = ds["siconc"][:], ds["latitude"][:]
    inside = lat[100:291] >= 60
    want = np.where(inside[None], c[0:3, 100:291], fill)
    np.testing.assert_array_equal(got, want)
    assert (got != fill).sum() > 1000
    np.testing.assert_array_equal(got_lat[inside], lat[100:291][inside])

    # A strict bound, and a value selection with it.
    ce = "siconc[5][0:290][0:359]&latitude>70&siconc>15"
    with netCDF4.Dataset(f"{base}/dap/ocean/sic?{ce}") as ds:
        ds.set_auto_mask(False)
        got = ds["siconc"][:]
    hold = (lat > 70) & (c[5] > 15) & (c[5] != fill)
    np.testing.assert_array_equal(got, np.where(hold, c[5], fill)[None])
    # An area takes ranges: != is refused, saying why.
    status, _, body = get(f"{base}/dap/ocean/sic.dods?siconc&latitude!=60")
    assert status == 400 and b"auxiliary coordinate" in body


def test_area_selection_through_pydap_and_ncdump(served):
    """The same area as the clients other than netCDF4-python send it: pydap passes the
    selection in the URL it opens, ncdump in the URL on its command line."""
    from pydap.client import open_url

    base, _ = served
    with netCDF4.Dataset(DATA / SIC) as src:
        src.set_auto_mask(False)
        c, lat = src["siconc"][:], src["latitude"][:]
        fill = np.float32(src["siconc"]._FillValue)
    # pydap composes a strided projection in the URL wrongly with its own slicing (it asks
    # [250:4:260] for [250:4:290][0:11]), so its request is contiguous.
    want = np.where(lat[260:291] > 75, c[7, 260:291], fill)
    assert (want != fill).sum() > 1000
    ds = open_url(f"{base}/dap/ocean/sic?siconc[7][260:290][0:359]&latitude>75", protocol="dap2")
    got = np.asarray(ds["siconc"][:].data)
    np.testing.assert_array_equal(got.reshape(want.shape), want)

    want = np.where(lat[250:291:4, 0:360:9] > 75, c[7, 250:291:4, 0:360:9], fill)
    assert (want != fill).sum() > 20

    ncdump = shutil.which("ncdump")
    out = subprocess.run(
        [ncdump, "-v", "siconc", f"{base}/dap/ocean/sic?siconc[7][250:4:290][0:9:359]&latitude>75"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    # ncdump prints the fill value as "_", and floats to 7 significant digits.
    text = out.stdout.split("siconc =")[-1].split(";")[0]
    got = np.array([fill if x.strip() == "_" else np.float32(x) for x in text.split(",")], dtype=np.float32)
    assert np.array_equal(got == fill, want.ravel() == fill)
    np.testing.assert_allclose(got, want.ravel(), rtol=1e-6)


def test_ascii_response(served, source):
    base, _ = served
    status, _, body = get(f"{base}/dap/ersst.ascii?sst[3][40:41][0:4]")
    assert status == 200
    rows = [r for r in body.decode().splitlines() if r.startswith("[0][")]
    got = np.array([[float(x) for x in r.split(", ")[1:]] for r in rows], dtype=np.float32)
    np.testing.assert_array_equal(got, source["sst"][3, 40:42, 0:5])


WRF = "wrf_katrina_ci_test_file.nc"
VMEC = "vmec_wout_n3are_R7.75B5.7.nc"
NORDIC = "Nordic-4km_SLEVELS_avg_00_subset2Feb2016.nc"
TREFHT = "trefht_B06_8member_ensemble_1890-1999.nc"
SCALARS = {"u1": 200, "i1": -5, "i2": -300, "u2": 60000, "i4": -70000, "u4": 4_000_000_000, "f4": 1.5, "f8": -2.25}


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    """Text variables served over DAP2: WRF's `char Times(Time, DateStrLen)` imported and
    in place, and a file of NetCDF-4 strings, a char array per station and a scalar one."""
    root = tmp_path_factory.mktemp("texts")
    strata.import_file(DATA / WRF, root / "wrf")
    shutil.copy(DATA / WRF, root / "wrf_file.nc")
    strata.index_file(root / "wrf_file.nc")
    names = np.array(["Oslo", "Bergen", "", "Tromsø", "a much longer station name"], dtype=object)
    codes = np.array(["OSL", "BGO", "X", "TOS", "ABCDEFGH"], dtype="S8")
    with netCDF4.Dataset(root / "stations.nc", "w") as nc:
        nc.createDimension("station", 5)
        nc.createDimension("nchar", 8)
        nc.createDimension("t", 3)
        nc.createVariable("name", str, ("station",))[:] = names
        nc.createVariable("code", "S1", ("station", "nchar"))[:] = netCDF4.stringtochar(codes)
        nc.createVariable("title", "S1", ("nchar",))[:] = netCDF4.stringtochar(np.array(["hello"], "S8"))[0]
        nc.createVariable("temp", "f4", ("t", "station"))[:] = np.arange(15).reshape(3, 5)
    strata.import_file(root / "stations.nc", root / "stations")
    (root / "stations.nc").unlink()
    # A scalar of every type, and the top of each unsigned range.
    with netCDF4.Dataset(root.parent / "scalars.nc", "w") as nc:
        nc.createDimension("x", 3)
        for t, v in SCALARS.items():
            nc.createVariable(f"s_{t}", t)[...] = v
            nc.createVariable(f"a_{t}", t, ("x",))[:] = [v, 0, v]
        nc.createVariable("flag", "i1")[...] = -1
        nc["flag"]._Unsigned = "true"
    strata.import_file(root.parent / "scalars.nc", root / "scalars")
    strata.import_file(DATA / VMEC, root / "vmec")
    strata.import_file(DATA / NORDIC, root / "nordic")
    strata.import_file(DATA / "ihesp14.TS.12mon.nc", root / "noleap")
    strata.import_file(DATA / TREFHT, root / "members")
    proc, base = start_server(root, root.parent / "texts.log")
    with netCDF4.Dataset(DATA / WRF) as nc:
        times = netCDF4.chartostring(nc["Times"][:])
    yield base, times, names, codes, root
    proc.terminate()
    proc.wait(timeout=30)


def test_text_variables_over_dap_read_as_the_file_has_them(texts):
    from pydap.client import open_url

    base, times, names, codes, _ = texts
    for dataset in ("wrf", "wrf_file.nc.strata"):
        url = f"{base}/dap/{dataset}"
        head = subprocess.run(["ncdump", "-h", url], capture_output=True, text=True, timeout=60)
        assert head.returncode == 0 and "char Times(Time, DateStrLen) ;" in head.stdout, head.stderr
        with netCDF4.Dataset(url) as ds:
            assert ds["Times"].dimensions == ("Time", "DateStrLen") and ds.dimensions["DateStrLen"].size == 19
            np.testing.assert_array_equal(netCDF4.chartostring(ds["Times"][:]), times)
            np.testing.assert_array_equal(netCDF4.chartostring(ds["Times"][1:4:2]), times[1:4:2])
        # pydap reads DAP2 strings as they are sent: one per time.
        got = open_url(url, protocol="dap2")["Times"][1:3].data
        assert [t.decode() for t in np.asarray(got)] == list(times[1:3])
        dump = subprocess.run(["ncdump", "-v", "Times", url], capture_output=True, text=True, timeout=60)
        assert all(f'"{t}"' in dump.stdout for t in times), dump.stdout[-400:]
    url = f"{base}/dap/stations"
    with netCDF4.Dataset(url) as ds:
        # NetCDF-4 strings come as chars over DAP2, the longest (in bytes) setting the width,
        # flagged _Encoding: netCDF4 gives the strings back, as from the file.
        assert list(ds["name"][:]) == list(names) and ds["name"].shape == (5, len("a much longer station name"))
        np.testing.assert_array_equal(netCDF4.chartostring(ds["code"][2:]), codes[2:].astype(str))
        assert netCDF4.chartostring(ds["title"][:]) == "hello"
        np.testing.assert_array_equal(ds["temp"][:], np.arange(15).reshape(3, 5))
    status, headers, body = get(f"{url}.ascii?name[1:2:3],title")
    assert status == 200 and '"Bergen", "Tromsø"' in body.decode() and '"hello"' in body.decode()
    # Strings are as long as they are: the answer goes chunked, whole.
    status, headers, body = get(f"{url}.dods?code")
    assert status == 200 and "Content-Length" not in headers
    data = body.split(b"Data:\n", 1)[1]
    assert data[:4] == (5).to_bytes(4, "big") and data.endswith(b"ABCDEFGH")
    # Subsets are classic files: NetCDF-4 strings go as characters flagged _Encoding, which
    # xarray reads back as the strings.
    remote = strata.remote.open(f"{base}/stations")
    assert list(remote.to_xarray()["name"].values) == list(names)
    assert list(remote.isel(station=slice(1, 4))["name"].values) == list(names[1:4])
    for bad in ["code[0:1:2][0:1:3]", "title[0]", "temp&code>3"]:
        status, _, body = get(f"{url}.dods?{urllib.parse.quote(bad, safe='[]:,&')}")
        assert status in (400, 404) and b"Error" in body, (bad, body)


def test_scalars_and_unsigned_integers_over_dap(texts):
    from pydap.client import open_url

    base = texts[0]
    # A scalar carries no length words: with them, netCDF's client failed every variable of
    # a dataset holding a scalar (VMEC's dozens), as its first read fetches the small ones.
    with netCDF4.Dataset(DATA / VMEC) as want, netCDF4.Dataset(f"{base}/dap/vmec") as got:
        for name, v in want.variables.items():
            if v.dtype.kind == "S":
                assert netCDF4.chartostring(got[name][:]) == netCDF4.chartostring(v[:]), name
            else:
                np.testing.assert_array_equal(got[name][...], v[...], err_msg=name)
    ds = open_url(f"{base}/dap/scalars", protocol="dap2")
    with netCDF4.Dataset(f"{base}/dap/scalars") as nc:
        for t, v in SCALARS.items():
            # UInt16 and UInt32 are signed in netCDF's classic model unless flagged.
            assert nc[f"s_{t}"][...] == v and list(nc[f"a_{t}"][:]) == [v, 0, v], t
            assert np.asarray(ds[f"s_{t}"][...].data) == v, t
            assert list(np.asarray(ds[f"a_{t}"][:].data)) == [v, 0, v], t
        assert nc["flag"][...] == 255 and np.asarray(ds["flag"][...].data) == 255
    out = subprocess.run(["ncdump", "-v", "s_f8,s_i4", f"{base}/dap/scalars"], capture_output=True, text=True)
    assert "s_f8 = -2.25 ;" in out.stdout and "s_i4 = -70000 ;" in out.stdout, out.stderr


def test_query_count_and_points_equal_numpy(served, source):
    base, _ = served
    sst = source["sst"]
    q = urllib.parse.urlencode({"where": "sst > 28", "isel": "time=0:24"})
    status, _, body = get(f"{base}/api/query/ersst?{q}")
    assert status == 200, body
    assert json.loads(body)["count"] == int(((sst[:24] > 28) & (sst[:24] != -999)).sum())

    q = urllib.parse.urlencode({"where": "sst >= 29.5", "output": "points", "isel": "time=10:40:3,lat=5:80"})
    status, headers, body = get(f"{base}/api/query/ersst?{q}")
    assert status == 200 and headers["content-type"] == "application/vnd.apache.arrow.stream"
    table = pa.ipc.open_stream(io.BytesIO(body)).read_all()
    sub = sst[10:40:3, 5:80]
    t, la, lo = np.nonzero(sub >= 29.5)
    assert table.column_names == ["time", "lat", "lon", "sst"]
    np.testing.assert_array_equal(table["sst"].to_numpy(), sub[t, la, lo])
    # Coordinates as SQL has them: CF times as timestamps, the rest in their own type.
    days = source["time"][10:40:3][t].astype("timedelta64[D]")
    np.testing.assert_array_equal(table["time"].to_numpy(), np.datetime64("1960-01-01", "us") + days)
    np.testing.assert_array_equal(table["lat"].to_numpy(), source["lat"][5:80][la])

    # The same rows as Parquet (a row group per piece).
    import pyarrow.parquet as pq

    status, headers, pq_body = get(f"{base}/api/query/ersst?{q}&format=parquet")
    assert status == 200 and headers["content-type"] == "application/vnd.apache.parquet"
    assert pq.read_table(io.BytesIO(pq_body)).equals(table)

    # Compressed on the wire when the client accepts it.
    status, headers, packed = get(f"{base}/api/query/ersst?{q}", headers={"Accept-Encoding": "zstd"})
    assert status == 200 and headers["content-encoding"] == "zstd" and len(packed) < len(body) / 2
    plain = pa.CompressedInputStream(pa.BufferReader(packed), "zstd").read()
    assert pa.ipc.open_stream(plain).read_all().equals(table)

    body = json.dumps({"where": "sst > 33", "output": "positions", "format": "csv"}).encode()
    status, _, out = get(f"{base}/api/query/ersst", data=body)
    assert status == 200
    lines = out.decode().strip().splitlines()
    assert lines[0] == "time,lat,lon" and len(lines) - 1 == int((sst > 33).sum())


def test_sql_route_answers_and_refuses_writes(served, source, tmp_path):
    base, _ = served
    q = urllib.parse.urlencode({"q": "SELECT count(*) AS n FROM ersst WHERE sst > 28 AND lat > 0", "format": "json"})
    status, _, body = get(f"{base}/api/sql/ersst?{q}")
    assert status == 200, body
    lat_pos = source["lat"] > 0
    want = int(((source["sst"] > 28) & lat_pos[None, :, None]).sum())
    assert json.loads(body) == [{"n": want}]
    target = tmp_path / "leak.csv"
    for sql in [
        f"COPY (SELECT 1) TO '{target}'",
        "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'",
        "DROP TABLE ersst",
        "SET datafusion.execution.batch_size = 1",
    ]:
        status, _, body = get(f"{base}/api/sql/ersst?" + urllib.parse.urlencode({"q": sql}))
        assert status == 400, (sql, body)
        assert json.loads(body)["error"]["kind"] == "invalid_argument"
    assert not target.exists()


def test_an_error_after_the_answer_began_is_reported_not_taken_for_data(served):
    """The server sends a query's status after its first batch: an error in a later batch
    (here a division by zero in 2016's rows, the last of ERSST) can only cut the body
    short. The Python client says so; the server keeps serving."""
    base, _ = served
    ds = strata.remote.open(f"{base}/ersst")
    query = "SELECT 1 / (CAST(date_part('year', time) AS BIGINT) - 2016) AS q FROM ersst"
    with pytest.raises(strata.errors.StrataIOError, match="cut its answer short"):
        ds.sql(query)
    # The same query over the years before 2016 is whole.
    assert len(ds.sql(query + " WHERE time < '2016-01-01'")) == 672 * 89 * 180
    assert get(f"{base}/health")[0] == 200


def test_local_sql_is_read_only_too(imported, tmp_path):
    target = tmp_path / "out.csv"
    with pytest.raises(strata.errors.InvalidArgumentError):
        strata.sql(imported(ERSST), f"COPY (SELECT 1) TO '{target}'")
    assert not target.exists()


def test_schema_descriptors(served, source):
    base, _ = served
    s = json.loads(get(f"{base}/api/schema/ersst")[2])
    assert s["sql_table"] == "ersst"
    assert s["logical"]["coordinates"]["lat"]["values"] == source["lat"].astype(float).tolist()
    v = s["values"]["sst"]
    valid = source["sst"][source["sst"] != -999]
    assert v["valid"] == valid.size
    assert v["min"] == float(valid.min()) and v["max"] == float(valid.max())
    assert abs(sum(v["histogram"]["counts"]) - valid.size) < 1e-6 * valid.size
    assert s["physical"]["stored_bytes"] > 0 and s["physical"]["versions"] == [1]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/dap/nope.dds", 404),
        ("/dap/ersst.dds?nope", 404),
        ("/dap/ersst.dds?sst[0:1", 400),
        ("/dap/ersst.dds?sst[0][0][999]", 400),
        ("/dap/ersst.dods?sst[5:2][0][0]", 400),
        ("/dap/ersst.dds?sst&nope%3E0", 400),
        ("/dap/ersst.dds?sst&sst%3E0&lat%3C3", 400),
        ("/dap/ersst.xyz", 404),
        ("/dap/..%2F..%2Fetc%2Fpasswd.dds", 404),
        ("/dap/notes.dds", 404),
        ("/dap/notes/readme.txt", 404),
        ("/api/schema/..", 404),
        ("/api/query/ersst?where=sst%20%3E", 400),
        ("/api/query/ersst?where=sst%3E1&isel=time=999", 400),
        ("/api/query/ersst?where=sst%3E1&output=cube", 400),
        ("/api/query/ersst?where=nope%3E1", 400),
        ("/nothing/here", 404),
    ],
)
def test_bad_requests_get_clear_errors(served, path, status):
    base, _ = served
    got, _, body = get(base + path)
    assert got == status, body
    text = body.decode()
    if path.startswith("/dap/"):
        assert text.startswith("Error {") and f"code = {status};" in text
    else:
        assert json.loads(text)["error"]["message"]
    assert "/tmp" not in text and str(DATA) not in text
    assert get(f"{base}/health")[0] == 200


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet="sstlatime[]:,&<>=!0123456789.-%3E5B\"' ", max_size=40))
def test_hostile_constraints_never_break_the_server(served, ce):
    base, _ = served
    quoted = urllib.parse.quote(ce, safe="")
    status, _, body = get(f"{base}/dap/ersst.dds?{quoted}")
    assert status in (200, 400, 404, 413), (ce, status, body)


def test_concurrent_clients_get_their_own_answers(served, source):
    base, _ = served
    keys = [(i, slice(i % 50, i % 50 + 30), slice(None, None, 1 + i % 5)) for i in range(0, 600, 37)]

    def fetch(key):
        t, la, lo = key
        ce = f"sst[{t}][{la.start}:{la.stop - 1}][0:{lo.step}:179]"
        status, _, body = get(f"{base}/dap/ersst.dods?{ce}")
        assert status == 200
        data = body.split(b"Data:\n", 1)[1]
        n = int.from_bytes(data[:4], "big")
        return np.frombuffer(data[8 : 8 + 4 * n], dtype=">f4")

    with cf.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(fetch, keys))
    for (t, la, lo), got in zip(keys, results, strict=True):
        np.testing.assert_array_equal(got, source["sst"][t, la, lo].ravel())


@pytest.fixture(scope="module")
def guarded(served, tmp_path_factory):
    """The same stores behind a config file: a token on one dataset and tight limits."""
    _, root = served
    cfg = tmp_path_factory.mktemp("cfg") / "server.toml"
    cfg.write_text(
        "[limits]\nmax_result_bytes = 60_000_000\nconcurrent_per_client = 2\n"
        '[datasets."ocean/sic"]\ntoken = "sea-ice-token-1"\n'
    )
    proc, base = start_server(root, cfg.parent / "server.log", "--config", str(cfg))
    yield base
    proc.terminate()
    proc.wait(timeout=30)


def test_tokens_open_their_dataset_only(guarded):
    base = guarded
    assert get(f"{base}/api/schema/ocean/sic")[0] == 401
    assert get(f"{base}/dap/ocean/sic.dds")[0] == 401
    ok = {"Authorization": "Bearer sea-ice-token-1"}
    assert get(f"{base}/api/schema/ocean/sic", headers=ok)[0] == 200
    assert get(f"{base}/api/schema/ocean/sic", headers={"Authorization": "Bearer sea-ice-token-2"})[0] == 401
    assert get(f"{base}/api/schema/ersst")[0] == 200  # no token configured: open
    listed = json.loads(get(f"{base}/api/datasets")[2])["datasets"]
    assert {"name": "ocean/sic", "protected": True} in listed
    # A DAP client sends the token as a URL's password (HTTP Basic).
    host = base.removeprefix("http://")
    with netCDF4.Dataset(f"http://reader:sea-ice-token-1@{host}/dap/ocean/sic") as ds:
        assert ds["siconc"].shape == (12, 291, 360)


def test_limits_answer_413_and_429(guarded):
    base = guarded
    status, _, body = get(f"{base}/dap/ersst.dods?sst")  # 43.8 MB: within the limit
    assert status == 200 and len(body) > 684 * 89 * 180 * 4
    status, _, body = get(f"{base}/dap/ersst.dods")  # sst and coordinates: still fine
    assert status == 200
    status, _, body = get(f"{base}/api/query/ersst?where=sst%3E-10&output=points")
    assert status == 413 and json.loads(body)["error"]["kind"] == "too_large"
    # Two large responses left unread hold both of this client's slots: a third waits its turn.
    import http.client

    host, port = base.removeprefix("http://").split(":")
    held = []
    for _ in range(2):
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        c.request("GET", "/dap/ersst.dods?sst")
        r = c.getresponse()
        assert r.status == 200
        held.append((c, r))
    status, _, body = get(f"{base}/health")
    assert status == 429 and json.loads(body)["error"]["kind"] == "too_many_requests"
    for c, r in held:
        r.read()
        c.close()
    for _ in range(100):
        if get(f"{base}/health")[0] == 200:
            break
        time.sleep(0.05)
    assert get(f"{base}/health")[0] == 200


def test_subset_is_a_netcdf_file_equal_to_the_selection(served, source, tmp_path):
    base, _ = served
    q = urllib.parse.urlencode({"vars": "sst", "isel": "time=100:130:3,lat=10:80"})
    status, headers, body = get(f"{base}/api/subset/ersst?{q}")
    assert status == 200 and headers["content-type"] == "application/x-netcdf"
    assert int(headers["content-length"]) == len(body)
    with netCDF4.Dataset("subset.nc", memory=body) as nc:
        nc.set_auto_mask(False)
        assert nc.data_model == "NETCDF3_64BIT_DATA"
        np.testing.assert_array_equal(nc["sst"][:], source["sst"][100:130:3, 10:80])
        np.testing.assert_array_equal(nc["time"][:], source["time"][100:130:3])
        np.testing.assert_array_equal(nc["lat"][:], source["lat"][10:80])
        assert nc["sst"].units == "degree_Celsius" and nc.Conventions == "IRIDL"


def test_byte_ranges_and_parts_rebuild_the_same_file(served):
    base, _ = served
    q = urllib.parse.urlencode({"vars": "sst", "isel": "time=0:50"})
    whole = get(f"{base}/api/subset/ersst?{q}")[2]
    total = len(whole)
    for lo, hi in [(0, 0), (0, 99), (3, 1000), (total - 7, total - 1), (1234567, 2345678)]:
        status, headers, body = get(f"{base}/api/subset/ersst?{q}", headers={"Range": f"bytes={lo}-{hi}"})
        assert status == 206 and headers["content-range"] == f"bytes {lo}-{hi}/{total}"
        assert body == whole[lo : hi + 1]
    parts = [get(f"{base}/api/subset/ersst?{q}&parts=3&part={i}")[2] for i in range(3)]
    assert b"".join(parts) == whole and max(map(len, parts)) - min(map(len, parts)) <= 1
    assert get(f"{base}/api/subset/ersst?{q}", headers={"Range": f"bytes={total}-"})[0] == 416


def test_remote_dataset_runs_at_the_server(served, source, tmp_path):
    base, _ = served
    ds = strata.remote.open(f"{base}/ersst")
    assert ds.dims == {"time": 684, "lat": 89, "lon": 180}
    sst = source["sst"]
    assert ds.query("sst > 30", isel={"time": slice(-24, None)}, output="count") == int((sst[-24:] > 30).sum())
    frame = ds.query("sst > 31", sel={"lat": slice(-20, 20)})
    lat = source["lat"]
    rows = (lat >= -20) & (lat <= 20)
    assert len(frame) == int((sst[:, rows] > 31).sum())
    # Four parts over four connections: the same rows, in the same order.
    parts = ds.query("sst > 29", streams=4)
    assert parts.equals(ds.query("sst > 29"))
    sizes = [
        len(
            pa.ipc.open_stream(
                io.BytesIO(get(f"{base}/api/query/ersst?where=sst%3E29&output=positions&parts=4&part={i}")[2])
            ).read_all()
        )
        for i in range(4)
    ]
    assert sum(sizes) == len(parts) and min(sizes) > len(parts) / 8  # balanced by the planner's estimate
    x = ds.sel(time=slice("1999-01", "1999-12"), lat=slice(0, 10))
    ref = strata.open(str(served[1] / "ersst")).to_xarray() if hasattr(strata.Dataset, "to_xarray") else None
    assert x["sst"].shape == (12, 6, 180)
    if ref is not None:
        np.testing.assert_array_equal(
            x["sst"].values, ref["sst"].sel(time=slice("1999-01", "1999-12"), lat=slice(0, 10)).values
        )
    out = tmp_path / "fetched.nc"
    size = ds.fetch(out, ["sst"], isel={"time": slice(0, 300)}, streams=4)
    assert out.stat().st_size == size
    with netCDF4.Dataset(out) as nc:
        nc.set_auto_mask(False)
        np.testing.assert_array_equal(nc["sst"][:], sst[:300])
    with pytest.raises(strata.errors.InvalidArgumentError):
        ds.query("sst >", output="count")
    with pytest.raises(strata.errors.NotFoundError):
        _ = strata.remote.open(f"{base}/nothing").schema


def test_fetch_command(served, source, tmp_path):
    base, _ = served
    out = tmp_path / "cli.nc"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "strata.cli",
            "fetch",
            f"{base}/ersst",
            "--vars",
            "sst",
            "--isel",
            "time=10:20",
            "--sel",
            "lon=100:200",
            "-o",
            str(out),
            "--streams",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    lon = source["lon"]
    cols = (lon >= 100) & (lon <= 200)
    with netCDF4.Dataset(out) as nc:
        nc.set_auto_mask(False)
        np.testing.assert_array_equal(nc["sst"][:], source["sst"][10:20][:, :, cols])
    # It said first which would come sooner, and with what the subset weighed.
    assert "estimate: the subset is" in r.stderr and "Mb/s" in r.stdout, (r.stdout, r.stderr)


def test_fetch_estimate_weighs_the_subset_against_the_whole_dataset(served, tmp_path):
    """The advice `strata fetch` gives: a small subset is sooner unless the link is very
    fast; a subset larger than the whole (compressed) dataset never is. Sizes are exact:
    the subset's is the file the fetch writes, the dataset's its files on the server."""
    base, root = served
    ds = strata.remote.open(f"{base}/ersst")
    small = ds.estimate_fetch(["sst"], isel={"time": slice(0, 6)})
    path = tmp_path / "small.nc"
    assert small.subset_bytes == ds.fetch(path, ["sst"], isel={"time": slice(0, 6)}) == path.stat().st_size
    # The store's data and index files: all it holds but its small manifest and pointer.
    stored = sum(f.stat().st_size for f in (root / "ersst").rglob("*") if f.is_file())
    assert stored * 0.99 < small.dataset_bytes < stored
    assert small.server_seconds > 0
    above = small.whole_sooner_above_bits_per_s
    # One piece: cutting and sending do not overlap, the subset takes S + U/B.
    assert small.pieces == 1
    assert above == pytest.approx((small.dataset_bytes - small.subset_bytes) * 8 / small.server_seconds)
    assert "sooner only on links faster than" in small.advice()
    # On a link just under the break-even the subset wins, just over it the whole.
    assert small.advice(above * 0.9).endswith("the subset wins)")
    assert small.advice(above * 1.1).endswith("the whole dataset wins)")
    # Every record of sst, uncompressed in NetCDF, outweighs the compressed store.
    whole = ds.estimate_fetch(["sst"])
    assert whole.subset_bytes > whole.dataset_bytes and whole.whole_sooner_above_bits_per_s == 0
    assert "sooner on any link" in whole.advice()
    r = subprocess.run(
        [sys.executable, "-m", "strata.cli", "fetch", f"{base}/ersst", "--vars", "sst", "--estimate", "--link", "100"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout.startswith("estimate:") and "no larger" in r.stdout, r.stderr
    assert not list(tmp_path.glob("*.part"))
    status, _, body = get(f"{base}/api/subset/ersst?vars=nope&estimate=true")
    assert status == 400 and b"nope" in body, body


def test_fetch_points_by_value_to_a_file(served, source, tmp_path, monkeypatch):
    """`fetch(where=...)` writes the points a value constraint selects, in any of the three
    formats and over any number of streams, equal to NumPy's; its estimate is of their size
    on the wire; a bad file name or a damaged part loses nothing."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    from strata import _core

    base, _ = served
    ds = strata.remote.open(f"{base}/ersst")
    sst = source["sst"][:120]
    t, la, lo = np.nonzero(sst > 28)
    tables = {}
    for name, streams in (("warm.parquet", 3), ("warm.csv", 1), ("warm.arrow", 4)):
        size = ds.fetch(tmp_path / name, where="sst > 28", isel={"time": slice(0, 120)}, streams=streams)
        assert size == (tmp_path / name).stat().st_size > 0
        if name.endswith(".parquet"):
            tables[name] = pq.read_table(tmp_path / name)
        elif name.endswith(".csv"):
            tables[name] = pcsv.read_csv(tmp_path / name)
        else:
            tables[name] = pa.ipc.open_file(tmp_path / name).read_all()
    for table in tables.values():
        assert table.column_names == ["time", "lat", "lon", "sst"] and table.num_rows == len(t)
        np.testing.assert_array_equal(table["sst"].to_numpy().astype("f4"), sst[t, la, lo])
        np.testing.assert_array_equal(table["lon"].to_numpy(), source["lon"][lo])
    assert tables["warm.parquet"].equals(tables["warm.arrow"])
    assert not list(tmp_path.glob("*.part*"))

    # The estimate: the exact count times a sample's bytes per row, compressed as fetch
    # receives it; close to what the whole answer takes on the wire.
    e = ds.estimate_fetch(where="sst > 28", isel={"time": slice(0, 240)})
    assert not e.subset_exact and e.server_seconds > 0 and "about" in e.advice() and e.pieces > 1
    # Its pieces are cut while the last is sent: at the break-even the two downloads take as
    # long as the documented formula says, and the advice flips there.
    above = e.whole_sooner_above_bits_per_s

    def subset_s(bits):
        send = e.subset_bytes * 8 / bits
        return max(e.server_seconds, send) + min(e.server_seconds, send) / e.pieces

    assert subset_s(above) == pytest.approx(e.dataset_bytes * 8 / above)
    assert e.advice(above * 0.9).endswith("the subset wins)") and e.advice(above * 1.1).endswith("whole dataset wins)")
    q = urllib.parse.urlencode({"where": "sst > 28", "output": "points", "isel": "time=0:240"})
    status, headers, wire = get(f"{base}/api/query/ersst?{q}", headers={"Accept-Encoding": "zstd"})
    assert status == 200 and headers["content-encoding"] == "zstd"
    assert 0.5 < e.subset_bytes / len(wire) < 2, (e, len(wire))
    status, _, body = get(f"{base}/api/query/ersst?{q.replace('points', 'count')}&estimate=true")
    assert status == 400 and b"count" in body, body

    # Names that do not say the format are refused before anything is fetched.
    with pytest.raises(strata.errors.InvalidArgumentError, match=r"\.parquet, \.csv or \.arrow"):
        ds.fetch(tmp_path / "warm.txt", where="sst > 28")
    with pytest.raises(strata.errors.InvalidArgumentError, match="NetCDF"):
        ds.fetch(tmp_path / "dense.parquet", ["sst"])
    # A damaged part: an error, and neither the file nor its parts are left.
    real = _core.crc32c
    monkeypatch.setattr(_core, "crc32c", lambda data, crc=0: real(data, crc) ^ 1)
    with pytest.raises(strata.errors.StrataIOError, match="damaged or incomplete"):
        ds.fetch(tmp_path / "bad.parquet", where="sst > 28", isel={"time": slice(0, 120)}, streams=2)
    assert not list(tmp_path.glob("bad*"))
    monkeypatch.undo()

    cli = ["strata.cli", "fetch", f"{base}/ersst", "--where", "sst > 28", "--isel", "time=0:120", "--streams", "2"]
    r = subprocess.run(
        [sys.executable, "-m", *cli, "-o", str(tmp_path / "cli.csv")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "estimate: the subset is about" in r.stderr, r.stderr
    assert pcsv.read_csv(tmp_path / "cli.csv").num_rows == len(t)
    # Paths and counts that cannot work are refused before the server is asked anything.
    for out, extra, said in [
        (tmp_path / "no" / "x.csv", [], "does not exist"),
        (tmp_path, [], "is a folder"),
        (tmp_path / "x.nc", [], ".parquet, .csv or .arrow"),
        (tmp_path / "x.csv", ["--streams", "0"], "at least 1"),
    ]:
        r = subprocess.run(
            [sys.executable, "-m", *cli, "-o", str(out), *extra], capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 2 and said in r.stderr and "estimate:" not in r.stderr, (out, r.stderr)


def png_pixels(png: bytes) -> tuple[int, int, np.ndarray]:
    """Width, height and RGB pixels of a PNG as the renderer writes it (8-bit RGB, filter 0)."""
    import struct
    import zlib

    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(png):
        n = struct.unpack(">I", png[pos : pos + 4])[0]
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + n]
        assert zlib.crc32(kind + data) == struct.unpack(">I", png[pos + 8 + n : pos + 12 + n])[0]
        if kind == b"IHDR":
            w, h = struct.unpack(">II", data[:8])
            assert data[8:10] == b"\x08\x02"
        elif kind == b"IDAT":
            idat += data
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + 3 * w)
    assert (raw[:, 0] == 0).all()
    return w, h, raw[:, 1:].reshape(h, w, 3)


def test_quicklook_png_from_the_server_and_the_command_line(served, source, tmp_path):
    base, root = served
    status, headers, body = get(f"{base}/api/quicklook/ersst?var=sst&isel=time=5")
    assert status == 200 and headers["content-type"] == "image/png"
    w, h, px = png_pixels(body)
    scale = w // 180
    assert w == 180 * scale and h > 89 * scale
    # North up: the top row is the northernmost latitude; land (fill) is grey.
    sst = source["sst"][5]
    north = sst[-1]
    grey = (px[0, ::scale] == 160).all(axis=1)
    np.testing.assert_array_equal(grey, north == -999)
    out = tmp_path / "map.png"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "strata.cli",
            "quicklook",
            str(root / "ersst"),
            "sst",
            "--isel",
            "time=5",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == body
    status, _, body = get(f"{base}/api/quicklook/ersst?var=sst")
    assert status == 400 and "two dimensions" in json.loads(body)["error"]["message"]


def test_remote_points_are_the_local_points(texts):
    # The same frame, types included: a noleap calendar's cftime dates (the server sends
    # day numbers), an ensemble's member names (the server sends positions), WRF's times.
    import pandas as pd

    base = texts[0]
    root = texts[4]
    for name, where in [("noleap", "TS > 310"), ("members", "TREFHT > 300"), ("wrf", "T2 > 303")]:
        want = strata.open(root / name).query(where, output="points")
        assert len(want) > 100, name
        for streams in (1, 2):
            got = strata.remote.open(f"{base}/{name}").query(where, output="points", streams=streams)
            pd.testing.assert_frame_equal(got.reset_index(drop=True), want, obj=f"{name}, {streams} streams")


def test_xarray_over_dap_reads_strings_as_the_file_has_them(texts):
    # The ensemble's member names are NetCDF-4 strings: over DAP2 they are characters, and
    # _Encoding makes xarray give the names, not bytes, so the datasets are equal.
    with xr.open_dataset(f"{texts[0]}/dap/members") as got, xr.open_dataset(DATA / TREFHT) as want:
        xr.testing.assert_equal(got.load(), want.load())


def test_a_fill_the_variable_cannot_hold_is_left_out(texts):
    # The ROMS file gives its shorts a float _FillValue of 1e37. Read locally, netCDF4
    # ignores it; sent over DAP2, netCDF's client made it some short (-9998) and masked the
    # valid values equal to that.
    base = texts[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with netCDF4.Dataset(DATA / NORDIC) as want, netCDF4.Dataset(f"{base}/dap/nordic") as got:
            for name in ("temp", "u", "swrad"):
                np.testing.assert_array_equal(got[name][...].mask, want[name][...].mask, err_msg=name)
                np.testing.assert_array_equal(got[name][...], want[name][...], err_msg=name)
    das = get(f"{base}/dap/nordic.das")[2].decode()
    assert "Float32 _FillValue" not in das.split("    temp {")[1].split("}")[0]


def test_quicklook_of_a_curvilinear_grid_is_north_up(texts):
    # WRF's south_north has no 1-D coordinate; its 2-D XLAT increases along it. The coldest
    # T2 at the first time is in the north (row 42 of 48): it must be drawn near the top.
    base = texts[0]
    status, _, body = get(f"{base}/api/quicklook/wrf?var=T2&isel=Time=0")
    assert status == 200
    w, _, px = png_pixels(body)
    with netCDF4.Dataset(DATA / WRF) as nc:
        t2 = nc["T2"][0]
    scale = w // t2.shape[1]
    coldest = np.argwhere((px[: t2.shape[0] * scale] == [68, 1, 84]).all(axis=2))
    row = int(np.unravel_index(np.argmin(t2), t2.shape)[0])
    assert len(coldest) and (coldest[:, 0] // scale == t2.shape[0] - 1 - row).all(), coldest[:3]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sampled_from(["query", "subset", "quicklook", "sql", "schema"]),
    st.dictionaries(
        st.sampled_from(["where", "isel", "output", "vars", "var", "format", "parts", "part", "limit", "q", "x"]),
        st.text(alphabet="sstlatimeon=:,<>!&()0123456789.-%\"' ", max_size=30),
        max_size=4,
    ),
)
def test_hostile_api_requests_never_break_the_server(served, route, params):
    base, _ = served
    status, _, body = get(f"{base}/api/{route}/ersst?" + urllib.parse.urlencode(params))
    assert status in (200, 206, 400, 404, 413, 416), (route, params, status, body)
    if status != 200 and status != 206:
        assert json.loads(body)["error"]["message"]


def test_https_with_a_certificate_from_the_config(served, tmp_path):
    import ssl

    _, root = served
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    cfg = tmp_path / "server.toml"
    cfg.write_text(f'tls_cert = "{cert}"\ntls_key = "{key}"\n')
    proc, base = start_server(root, tmp_path / "tls.log", "--config", str(cfg))
    try:
        assert base.startswith("https://")
        ctx = ssl.create_default_context(cafile=str(cert))
        with urllib.request.urlopen(f"{base}/api/query/ersst?where=sst%3E33", context=ctx, timeout=30) as r:
            assert json.loads(r.read())["count"] > 0
        with pytest.raises(urllib.error.URLError):  # a client that does not trust the certificate
            urllib.request.urlopen(f"{base}/health", timeout=30)
        plain = base.replace("https://", "http://")
        with pytest.raises((urllib.error.URLError, ConnectionError, http_client_errors())):
            urllib.request.urlopen(f"{plain}/health", timeout=30)
        with urllib.request.urlopen(f"{base}/health", context=ctx, timeout=30) as r:
            assert r.status == 200  # still serving after the failed handshakes
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def http_client_errors():
    import http.client

    return http.client.HTTPException


def get_with_trailers(url: str) -> tuple[int, bytes, dict]:
    """A GET asking for trailers (h11 over a socket: urllib drops them)."""
    import socket

    import h11

    u = urllib.parse.urlsplit(url)
    conn = h11.Connection(h11.CLIENT)
    target = u.path + (f"?{u.query}" if u.query else "")
    headers = [("Host", u.netloc), ("TE", "trailers"), ("Connection", "close")]
    with socket.create_connection((u.hostname, u.port), timeout=60) as sock:
        sock.sendall(conn.send(h11.Request(method="GET", target=target, headers=headers)))
        sock.sendall(conn.send(h11.EndOfMessage()))
        status, body = 0, bytearray()
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                conn.receive_data(sock.recv(1 << 16))
            elif isinstance(ev, h11.Response):
                status = ev.status_code
            elif isinstance(ev, h11.Data):
                body += ev.data
            elif isinstance(ev, h11.EndOfMessage):
                return status, bytes(body), {k.decode(): v.decode() for k, v in ev.headers}


@pytest.mark.parametrize(
    "path",
    [
        "/dap/ersst.dods?sst[0:20][0:88][0:179]",
        "/api/query/ersst?where=sst%3E29&output=points",
        "/api/sql/ersst?q=SELECT%20lat%2C%20count(*)%20AS%20n%20FROM%20ersst%20GROUP%20BY%20lat&format=csv",
        "/api/subset/ersst?vars=sst&isel=time=0:30",
    ],
)
def test_each_streamed_response_ends_with_its_digest(served, path):
    import google_crc32c

    base, _ = served
    status, body, trailers = get_with_trailers(base + path)
    assert status == 200 and len(body) > 1000
    assert int(trailers["x-strata-crc32c"], 16) == google_crc32c.value(body)


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line.split()[1] for line in f if line.startswith("VmHWM:"))) * 1024


def test_server_memory_is_bounded_by_pieces_not_result_size(source, tmp_path):
    """A 350 MB answer streams through a server whose peak memory grows less than half that."""
    root = tmp_path / "big"
    root.mkdir()
    x4 = np.concatenate([source["sst"]] * 8)
    strata.write_arrays(root / "x4", {"sst": (("time", "lat", "lon"), x4)}, record_dim="time")
    proc, base = start_server(root, tmp_path / "big.log")
    try:
        assert get(f"{base}/dap/x4.dds")[0] == 200
        before = _peak_rss(proc.pid)
        for route in ("/dap/x4.dods?sst", "/api/subset/x4?vars=sst"):
            total = 0
            with urllib.request.urlopen(base + route, timeout=300) as r:
                while chunk := r.read(1 << 20):
                    total += len(chunk)
            assert total > x4.nbytes
        grown = _peak_rss(proc.pid) - before
        print(f"server peak grew {grown / 2**20:.0f} MiB")
        # Pieces of 4 MiB, two queued, plus the reader's 64 MiB cache of decoded segments:
        # about 100 MiB here whatever the answer's size.
        assert grown < x4.nbytes / 2, f"server grew {grown / 2**20:.0f} MiB for a {x4.nbytes / 2**20:.0f} MiB answer"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_appends_while_serving_show_whole_versions(served, tmp_path):
    """The server answers from the newest committed version: during appends every answer is
    one whole version (its time length is a version's, never in between)."""
    import threading

    base, root = served
    src = tmp_path / "part.nc"
    with netCDF4.Dataset(DATA / ERSST) as nc, netCDF4.Dataset(src, "w", format="NETCDF4") as out:
        nc.set_auto_mask(False)
        for d in ("lat", "lon"):
            out.createDimension(d, nc.dimensions[d].size)
            out.createVariable(d, nc[d].dtype, (d,))[:] = nc[d][:]
        out.createDimension("time", None)
        t = out.createVariable("time", nc["time"].dtype, ("time",))
        t.units = nc["time"].units
        t.calendar = getattr(nc["time"], "calendar", "standard")
        v = out.createVariable("sst", "f4", ("time", "lat", "lon"), fill_value=np.float32(-999))
        v.units = "degree_Celsius"
        for a in ("pointwidth", "valid_min", "valid_max", "long_name", "standard_name"):
            if a in nc["sst"].ncattrs():
                v.setncattr(a, nc["sst"].getncattr(a))
        last = nc["time"][-1]
        t[:] = last + 31 * np.arange(1, 13)
        v[:] = nc["sst"][-12:]
    copy = root / "ocean" / "grow"
    shutil.copytree(root / "ersst", copy)
    try:
        lengths, stop, failures = set(), threading.Event(), []

        def poll():
            while not stop.is_set():
                status, _, body = get(f"{base}/dap/ocean/grow.dds")
                if status != 200:
                    failures.append((status, body))
                    return
                lengths.add(int(re.search(r"time = (\d+)\]", body.decode()).group(1)))

        t = threading.Thread(target=poll)
        t.start()
        for _ in range(3):
            strata.append_file(src, copy)
            src_t = netCDF4.Dataset(src, "a")
            src_t["time"][:] = src_t["time"][:] + 31 * 12
            src_t.close()
        stop.set()
        t.join()
        assert not failures, failures
        assert len(lengths) >= 2 and lengths <= {684, 696, 708, 720}, lengths
        assert get_len(base) == 720
    finally:
        shutil.rmtree(copy)


def test_a_store_removed_or_made_again_under_its_name_is_seen(served):
    """The server remembers where a name leads and its newest version; a store deleted, or
    made again under the same name (version 1 again, other variables), is seen at once."""
    base, root = served
    path = root / "ocean" / "again"
    strata.write_arrays(path, {"a": (("x",), np.arange(10, dtype=np.float32))})
    try:
        status, _, body = get(f"{base}/dap/ocean/again.dods?a")
        assert status == 200 and "a[x = 10]" in body.decode("latin-1")
        shutil.rmtree(path)
        status, _, body = get(f"{base}/dap/ocean/again.dds")
        assert status == 404, body
        values = np.linspace(-1, 1, 7)
        strata.write_arrays(path, {"b": (("y",), values)})
        status, _, body = get(f"{base}/dap/ocean/again.dods?b")
        assert status == 200, body
        head, _, data = body.partition(b"\nData:\n")
        assert b"b[y = 7]" in head
        assert np.array_equal(np.frombuffer(data[8:], ">f8"), values)
        status, _, body = get(f"{base}/dap/ocean/again.dds?a")
        assert status == 404 and b"no variable 'a'" in body, body
    finally:
        shutil.rmtree(path, ignore_errors=True)


def get_len(base: str) -> int:
    return int(re.search(r"time = (\d+)\]", get(f"{base}/dap/ocean/grow.dds")[2].decode()).group(1))


def test_fetch_checks_each_parts_digest(served, tmp_path, monkeypatch):
    """strata.remote's fetch refuses a part whose bytes do not match the server's digest."""
    from strata import _core

    base, _ = served
    ds = strata.remote.open(f"{base}/ersst")
    out = tmp_path / "ok.nc"
    ds.fetch(out, ["sst"], isel={"time": slice(0, 20)}, streams=3)
    real = _core.crc32c
    monkeypatch.setattr(_core, "crc32c", lambda data, crc=0: real(data, crc) ^ 1)  # a flipped bit
    with pytest.raises(strata.errors.StrataIOError, match="damaged or incomplete"):
        ds.fetch(tmp_path / "bad.nc", ["sst"], isel={"time": slice(0, 20)}, streams=3)
    assert not (tmp_path / "bad.nc").exists()


def test_serving_one_store_directly(served, source, tmp_path):
    """`strata serve STORE` serves that store alone, named by its folder."""
    _, root = served
    proc, base = start_server(root / "ersst", tmp_path / "one.log")
    try:
        names = [d["name"] for d in json.loads(get(f"{base}/api/datasets")[2])["datasets"]]
        assert names == ["ersst"]
        with netCDF4.Dataset(f"{base}/dap/ersst") as nc:
            nc.set_auto_mask(False)
            np.testing.assert_array_equal(nc["sst"][7, 3:9, 100], source["sst"][7, 3:9, 100])
        assert get(f"{base}/dap/other.dds")[0] == 404
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_queries_through_a_curvilinear_area(served):
    """`area=latitude=60:` at the server is the engine's mask, as `sel` is locally: counts
    and points equal NumPy's, and the remote client sends a 2-D coordinate's range there."""
    base, _ = served
    with netCDF4.Dataset(DATA / SIC) as nc:
        nc.set_auto_mask(False)
        c, lat, lon = nc["siconc"][:], nc["latitude"][:], nc["longitude"][:]
    arctic = (lat >= 60)[None]
    q = urllib.parse.urlencode({"where": "siconc > 15", "area": "latitude=60:"})
    status, _, body = get(f"{base}/api/query/ocean/sic?{q}")
    assert status == 200, body
    assert json.loads(body)["count"] == int(((c > 15) & (c < 1e19) & arctic).sum()) > 0
    # The server keeps the area it built: the same request again, and another constraint
    # through it, answer as a fresh one would.
    assert json.loads(get(f"{base}/api/query/ocean/sic?{q}")[2])["count"] == json.loads(body)["count"]
    q90 = urllib.parse.urlencode({"where": "siconc > 90", "area": "latitude=60:"})
    assert json.loads(get(f"{base}/api/query/ocean/sic?{q90}")[2])["count"] == int(
        ((c > 90) & (c < 1e19) & arctic).sum()
    )
    # Points across the dateline, in order, over two connections.
    ds = strata.remote.open(f"{base}/ocean/sic")
    sel = {"latitude": (50, None), "longitude": (300, 60)}
    frame = ds.query("siconc > 50", sel=sel, streams=2)
    want = (c > 50) & (c < 1e19) & ((lat >= 50) & ((lon >= 300) | (lon <= 60)))[None]
    _, j, i = np.nonzero(want)
    np.testing.assert_array_equal(frame["j"].to_numpy(), j)
    np.testing.assert_array_equal(frame["i"].to_numpy(), i)
    np.testing.assert_array_equal(frame["siconc"].to_numpy(), c[want])
    assert ds.query("siconc > 50", sel=sel, output="count") == len(frame)
    # Points carry the auxiliary coordinates, as local points do.
    np.testing.assert_array_equal(frame["latitude"].to_numpy(), lat[j, i])
    np.testing.assert_array_equal(frame["longitude"].to_numpy(), lon[j, i])
    local = strata.open(served[1] / "ocean" / "sic").query("siconc > 50", sel=sel)
    assert list(frame.columns) == list(local.columns)
    # The command line's text form (`--sel latitude=50: --sel longitude=300:60`), to a file.
    out = served[1].parent / "arctic.parquet"
    cli = ["strata.cli", "fetch", f"{base}/ocean/sic", "--where", "siconc > 50", "--sel", "latitude=50:"]
    r = subprocess.run(
        [sys.executable, "-m", *cli, "--sel", "longitude=300:60", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    import pyarrow.parquet as pq

    np.testing.assert_array_equal(pq.read_table(out)["siconc"].to_numpy(), c[want])
    for area, code in [
        ("latitude=60", 400),
        ("latitude=a:b", 400),
        ("time=0:1", 400),
        ("latitude=1:,latitude=2:", 400),
    ]:
        status, _, body = get(
            f"{base}/api/query/ocean/sic?" + urllib.parse.urlencode({"where": "siconc > 1", "area": area})
        )
        assert status == code, (area, body)


def test_queries_and_subsets_select_by_labels_at_the_server(served, source, tmp_path):
    """`sel=time=1999-01:1999-06,lat=-10:10` is picked by the server's engine, with the rules
    of a local `sel` (partial dates, both ends included, the colons of a time of day): the
    answer equals xarray's selection of the same labels."""
    base, _ = served
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = xr.open_dataset(DATA / ERSST, mask_and_scale=False)
    want = ref["sst"].sel(time=slice("1999-01", "1999-06"), lat=slice(-10, 10)).values
    q = urllib.parse.urlencode({"where": "sst > 28", "sel": "time=1999-01:1999-06,lat=-10:10"})
    status, _, body = get(f"{base}/api/query/ersst?{q}")
    assert status == 200, body
    assert json.loads(body)["count"] == int((want > 28).sum()) > 0
    # A time of day with colons, a single date, and an empty range (an empty answer).
    q = urllib.parse.urlencode({"where": "sst > 28", "sel": "time=1999-01-15T00:00:00:1999-02-15T00:00"})
    assert json.loads(get(f"{base}/api/query/ersst?{q}")[2])["count"] == int(
        (ref["sst"].sel(time=slice("1999-01-15", "1999-02-15")).values > 28).sum()
    )
    q = urllib.parse.urlencode({"where": "sst > -5", "sel": "time=1999-03-15"})
    assert json.loads(get(f"{base}/api/query/ersst?{q}")[2])["count"] == int(
        (ref["sst"].sel(time="1999-03-15").values > -5).sum()
    )
    q = urllib.parse.urlencode({"where": "sst > 28", "sel": "time=2100:"})
    assert json.loads(get(f"{base}/api/query/ersst?{q}")[2])["count"] == 0
    # A subset file, and the remote client, which sends its labels there.
    q = urllib.parse.urlencode({"vars": "sst", "sel": "time=1999-01:1999-06,lat=-10:10"})
    status, _, body = get(f"{base}/api/subset/ersst?{q}")
    assert status == 200, body
    (tmp_path / "s.nc").write_bytes(body)
    with netCDF4.Dataset(tmp_path / "s.nc") as nc:
        nc.set_auto_mask(False)
        np.testing.assert_array_equal(nc["sst"][:], want)
    ds = strata.remote.open(f"{base}/ersst")
    got = ds.subset(["sst"], sel={"time": slice("1999-01", "1999-06"), "lat": slice(-10, 10)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        decoded = xr.open_dataset(DATA / ERSST)["sst"].sel(time=slice("1999-01", "1999-06"), lat=slice(-10, 10))
    np.testing.assert_array_equal(got["sst"].values, decoded.values)
    for sel, message in [
        ("time=1999-13", "not a date"),
        ("lat=north", "not a number"),
        ("time=1999-03-01", "not a value of coordinate 'time'"),
        ("depth=0:1", "no 1-D coordinate"),
        ("time=1999,time=2000", "selected twice"),
    ]:
        status, _, body = get(f"{base}/api/query/ersst?" + urllib.parse.urlencode({"where": "sst > 1", "sel": sel}))
        assert status == 400 and message in json.loads(body)["error"]["message"], (sel, body)
