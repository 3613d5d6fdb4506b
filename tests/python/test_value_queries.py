"""Level V and value queries: every result equals a NumPy reference, on every layout order."""

import itertools
import time

import netCDF4
import numpy as np
import pytest

import strata
from conftest import DATA, needs_data
from strata.cli import main

LAYOUTS = ["S", "S-M", "M-S", "S-V", "V-S"] + ["-".join(p) for p in itertools.permutations("SVM")]
FILL = -999.0


def fields(seed=0):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.normal(size=(24, 20, 30)), axis=2).astype("f4")
    t[rng.random(t.shape) < 0.3] = np.nan  # NaN-heavy
    t[:, :3, :4] = FILL  # a land mask of fill values
    t[5] = np.nan  # a record of nothing
    s = np.round(rng.normal(35, 2, size=t.shape), 1)  # f64: other chunk shapes than t
    k = rng.integers(0, 50, size=t.shape).astype("i2")
    return t, s, k


def write(path, layout, **kw):
    t, s, k = fields()
    binning = kw.pop("binning", None)
    bins = kw.pop("bins", 6) if "V" in layout else None
    strata.write_arrays(
        path,
        {
            "t": (("time", "y", "x"), t, {"_FillValue": np.float32(FILL)}),
            "s": (("time", "y", "x"), s),
            "k": (("time", "y", "x"), k),
            "x": (("x",), np.arange(30.0) * 2),
        },
        record_dim="time",
        layout=layout,
        bins=bins,
        binning=binning if "V" in layout else None,
        subchunks="time=3,y=8,x=16",
        slab_records=10,
        **kw,
    )
    return t, s, k


def valid(a):
    return ~np.isnan(a) & (a != FILL)


@pytest.fixture(scope="module", params=LAYOUTS)
def layout_store(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("v") / f"{request.param}.strata"
    return request.param, path, write(path, request.param)


def references(t, s, k):
    with np.errstate(invalid="ignore"):
        return {
            "t > 2": valid(t) & (t > 2),
            "t <= -1.5 and k != 7": valid(t) & (t <= -1.5) & (k != 7),
            "(t > 1 or s < 33) and k >= 10": ((valid(t) & (t > 1)) | (s < 33)) & (k >= 10),
            "s > 1e9": np.zeros(t.shape, bool),
            "t > -inf": valid(t),
            "k == 3 or k == 4": (k == 3) | (k == 4),
            "30 < s": s > 30,
        }


@pytest.mark.parametrize("method", ["index", "scan", "auto"])
def test_every_output_matches_numpy(layout_store, method):
    layout, path, (t, s, k) = layout_store
    ds = strata.open(path)
    for where, ref in references(t, s, k).items():
        assert ds.query(where, output="count", method=method) == ref.sum(), (layout, where)
        pos = ds.query(where, output="positions", method=method)
        for got, want in zip(pos, np.nonzero(ref), strict=True):
            np.testing.assert_array_equal(got, want, err_msg=f"{layout} {where}")
        pts, stats = ds.query(where, output="points", variables=["t", "s", "k"], method=method, with_stats=True)
        if method != "auto":
            assert stats["methods"] in ([method], []), stats
        if method == "scan" and stats["subchunks"]:
            assert stats["scanned"] > 0 and stats["full"] == 0, stats
        np.testing.assert_array_equal(pts["t"].to_numpy(), t[ref])
        np.testing.assert_array_equal(pts["k"].to_numpy(), k[ref])
        np.testing.assert_array_equal(pts["x"].to_numpy(), (np.arange(30.0) * 2)[np.nonzero(ref)[2]])
        dense = ds.query(where, output="dense", variables=["t"])
        np.testing.assert_array_equal(dense, np.where(ref, t, np.nan))
        dk = ds.query(where, output="dense", variables=["k"])
        np.testing.assert_array_equal(dk.mask, ~ref)
        np.testing.assert_array_equal(dk.data[ref], k[ref])


def test_dataset_query_refines_the_process_cost_model(tmp_path, monkeypatch):
    """Dataset.query folds each query's observed time into the process's session, and on a
    close call runs the method estimated slower until both have been observed."""
    import json

    from strata import _core
    from strata.query import session

    model = tmp_path / "model.json"
    text = json.dumps(
        {
            "version": 1,
            "source": "test",
            "ns": dict.fromkeys(("byte", "segment", "call", "decoded", "tested", "indexed", "gathered"), 1.0),
        }
    )
    model.write_text(text)
    monkeypatch.setenv("STRATA_COST_MODEL", str(model))
    t, _, _ = write(tmp_path / "s.strata", "V-S")
    ds = strata.open(tmp_path / "s.strata")
    assert session().source == "test"
    seen = set()
    for i in range(30):
        got, stats = ds.query("t > 1", output="count", with_stats=True)
        assert got == (valid(t) & (t > 1)).sum()
        seen.update(stats["methods"])
        # Counts learn on their own track, apart from points with values.
        select, values = session().learned("select"), session().learned("values")
        assert select.index_observed + select.scan_observed == i + 1, select
        assert values.index_observed + values.scan_observed == 0
    # Forced runs are observed too; a query cut in pieces counts as one.
    ds.query("t > 1", output="points", method="scan")
    values = session().learned("values")
    assert values.scan_observed == pytest.approx(1.0) and values.index_observed == 0
    # A rewritten model file starts a new session.
    model.write_text(text.replace('"test"', '"rewritten"'))
    assert session().source == "rewritten"
    values = session().learned("values")
    assert (values.index_observed, values.scan_observed) == (0, 0)
    # A close call runs the method observed less until it has been observed a quarter as
    # often; a clear call follows the estimate.
    other = _core.Session(text.replace('"test"', '"other"'))
    assert other.choose(1.0, 1.1) == "index"
    for _ in range(8):
        other.observe("index", 1.0, 1.0)
    assert other.choose(1.0, 1.1) == "scan"
    assert other.choose(1.0, 5.0) == "index"
    other.observe("scan", 1.0, 1.0)
    other.observe("scan", 1.0, 1.0)
    assert other.choose(1.0, 1.1) == "index"
    assert other.choose(5.0, 1.0) == "scan"


def test_query_batches_stream_the_same_result(tmp_path):
    import pandas as pd

    t, s, _ = write(tmp_path / "b.strata", "V-S")
    ds = strata.open(tmp_path / "b.strata")
    where, ref = "t > 1 or s < 33", (valid(t) & (t > 1)) | (s < 33)
    whole = ds.query(where, variables=["t", "k"])
    pieces = list(ds.query_batches(where, variables=["t", "k"]))
    # One piece per sub-chunk along time (3 records, in chunks of 10: cuts at 3, 6, 9, 10, 13, ..., 23, 24).
    assert ds["t"].subchunks[0] == 3 and ds["t"].chunks[0] == 10
    assert len(pieces) == 10
    pd.testing.assert_frame_equal(pd.concat(pieces, ignore_index=True), whole)
    assert sum(ds.query_batches(where, output="count", records=7)) == ref.sum()
    # A strided region with a piece boundary inside a stride.
    got = list(ds.query_batches(where, isel={"time": slice(3, 24, 4), "x": slice(1, 30, 2)}, output="positions"))
    sub = np.zeros_like(ref)
    sub[3:24:4, :, 1:30:2] = ref[3:24:4, :, 1:30:2]
    for axis, want in enumerate(np.nonzero(sub)):
        np.testing.assert_array_equal(np.concatenate([p[axis] for p in got]), want)
    # Stopping early cancels the rest: closing waits for the one piece read ahead, then
    # nothing more is read, far less than the whole query.
    whole_ds = strata.open(tmp_path / "b.strata", cache_bytes=0)
    list(whole_ds.query_batches(where))
    part_ds = strata.open(tmp_path / "b.strata", cache_bytes=0)
    it = part_ds.query_batches(where)
    next(it)
    it.close()
    after = part_ds.read_stats()
    time.sleep(0.05)
    assert part_ds.read_stats() == after
    assert after["segments_decoded"] <= whole_ds.read_stats()["segments_decoded"] * 3 / 10
    with pytest.raises(strata.InvalidArgumentError, match="streams"):
        ds.query_batches(where, output="dense")
    with pytest.raises(strata.InvalidArgumentError, match="records"):
        ds.query_batches(where, records=0)
    with pytest.raises(strata.InvalidArgumentError, match="method"):
        ds.query_batches(where, method="fast")


def test_query_batches_cut_where_slabs_restart_the_sub_chunks(tmp_path):
    # Slabs of 7 records, chunks of 5, sub-chunks of 3: each slab restarts the grid, so
    # sub-chunks start at 0, 3, 5, 7, 10, 12, 14, ... (not multiples of 3 or 5), and no
    # piece may split one: the pieces decode each sub-chunk once, as many segments as the
    # query whole.
    rng = np.random.default_rng(3)
    v = rng.normal(size=(28, 5, 6)).astype("f4")
    path = tmp_path / "slabs.strata"
    variables = {"v": ("f4", ("time", "y", "x"))}
    dims = {"time": None, "y": 5, "x": 6}
    with strata.Writer.create(
        path, dims=dims, variables=variables, chunks={"time": 5}, subchunks={"time": 3}, slab_records=7
    ) as w:
        for t0 in range(0, 28, 7):
            w.append(v=v[t0 : t0 + 7])
    whole = strata.open(path, cache_bytes=0)
    want = whole.query("v > 0.5", method="scan")
    pieced = strata.open(path, cache_bytes=0)
    got = list(pieced.query_batches("v > 0.5", method="scan"))
    assert len(got) == 12  # three sub-chunks in each of four slabs
    import pandas as pd

    pd.testing.assert_frame_equal(pd.concat(got, ignore_index=True), want)
    assert pieced.read_stats()["segments_decoded"] == whole.read_stats()["segments_decoded"]
    assert sum(pieced.query_batches("v > 0.5", output="count", records=8)) == (v > 0.5).sum()


@pytest.mark.parametrize("method", ["index", "scan"])
def test_regions_with_strides(layout_store, method):
    layout, path, (t, s, k) = layout_store
    ds = strata.open(path)
    region = (slice(2, 23, 4), slice(1, 19), slice(3, None, 5))
    isel = dict(zip(("time", "y", "x"), region, strict=True))
    for where, ref in references(t, s, k).items():
        sub = ref[region]
        assert ds.query(where, isel=isel, output="count", method=method) == sub.sum(), (layout, where)
        dense = ds.query(where, isel=isel, output="dense", variables=["s"], method=method)
        np.testing.assert_array_equal(dense, np.where(sub, s[region], np.nan))
        pos = ds.query(where, isel=isel, output="positions", method=method)
        want = np.zeros(ref.shape, bool)
        want[region] = sub
        for got, w in zip(pos, np.nonzero(want), strict=True):
            np.testing.assert_array_equal(got, w)
    with np.errstate(invalid="ignore"):
        assert ds.query("t > 0", isel={"time": 7}, output="count") == (valid(t[7]) & (t[7] > 0)).sum()


@pytest.mark.parametrize("method", ["index", "scan"])
def test_values_at_reduced_precision_with_an_exact_selection(layout_store, method):
    layout, path, (t, s, _) = layout_store
    ds = strata.open(path)
    ref = valid(t) & (t > 1) & (s > 34)
    for level in (1, 2):
        pts = ds.query("t > 1 and s > 34", output="points", variables=["t", "s"], precision=level, method=method)
        assert len(pts) == ref.sum()
        np.testing.assert_array_equal(pts["t"].to_numpy(), ds["t"].at_precision(level)[...][ref])
        np.testing.assert_array_equal(pts["s"].to_numpy(), ds["s"].at_precision(level)[...][ref])
        if "M" in layout:
            err = np.abs(pts["s"].to_numpy() - s[ref]) / np.abs(s[ref])
            assert err.max() <= ds["s"].at_precision(level).max_rel_error


def test_constraints_aligned_with_bins_are_answered_from_the_index(tmp_path):
    t, _, _ = write(tmp_path / "e.strata", "V-S", binning="-2,0,2")
    ds = strata.open(tmp_path / "e.strata")
    # The index method, as such (the cost model may try a scan on a store this small).
    for where, ref in [("t >= 2", valid(t) & (t >= 2)), ("t < 0", valid(t) & (t < 0))]:
        n, stats = ds.query(where, output="count", with_stats=True, method="index")
        assert n == ref.sum()
        assert stats["boundary"] == 0 and stats["full"] > 0
        before = ds.read_stats()["segments_decoded"]
        pos = ds.query(where, output="positions", method="index")
        assert ds.read_stats()["segments_decoded"] == before  # positions from bitmaps alone
        for got, want in zip(pos, np.nonzero(ref), strict=True):
            np.testing.assert_array_equal(got, want)
    # A constraint inside a bin reads only that bin's segments.
    _, stats = ds.query("t > 1", output="count", with_stats=True, method="index")
    assert stats["boundary"] > 0 and stats["empty"] > 0 and stats["full"] > 0


@pytest.mark.parametrize("layout", ["S", "V-S"])
@pytest.mark.parametrize("method", ["index", "scan"])
def test_float32_constants_compare_as_numpy_does(tmp_path, layout, method):
    """A constant compared with float32 values is a float32, as in NumPy and DuckDB:
    `v == 0.97` finds the elements that read 0.97 (a float64 comparison finds none)."""
    rng = np.random.default_rng(11)
    v = rng.choice(np.array([0.1, 0.3, 0.97, 1.1, -0.1], dtype="f4"), size=(12, 30, 40))
    v = v + rng.choice(np.array([0, 0, 1e-7], dtype="f4"), size=v.shape)
    path = tmp_path / "f.strata"
    binned = {"binning": "0.1,0.97"} if "V" in layout else {}
    strata.write_arrays(path, {"v": (("t", "y", "x"), v)}, layout=layout, **binned)
    ds = strata.open(path)
    for c in (0.97, 0.1, 0.3, -0.1, 1.1, 0.5):
        for op, ref in (
            ("==", v == c),
            ("!=", v != c),
            (">", v > c),
            (">=", v >= c),
            ("<", v < c),
            ("<=", v <= c),
        ):
            assert ds.query(f"v {op} {c}", output="count", method=method) == ref.sum(), (op, c)
        got = ds.query(f"v == {c}", output="positions", method=method)
        for g, w in zip(got, np.nonzero(v == c), strict=True):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("binning", ["equal-width", "equal-frequency", "-3,-1,0.5,4"])
def test_binning_rules_round_trip_and_query(tmp_path, binning):
    path = tmp_path / "b.strata"
    t, s, k = write(path, "V-M-S", binning=binning, bins=9)
    ds = strata.open(path)
    np.testing.assert_array_equal(ds["t"][...], t)
    np.testing.assert_array_equal(ds["s"][...], s)
    np.testing.assert_array_equal(ds["k"][...], k)
    assert ds.query("t > 0.25", output="count") == (valid(t) & (t > 0.25)).sum()
    rule = ds.manifest["layout"]["bins"]
    assert rule["method"] == ("edges" if "," in binning else binning)


def test_bad_queries_and_options_are_clear(tmp_path):
    path = tmp_path / "q.strata"
    write(path, "V-S")
    strata.write_arrays(tmp_path / "o.strata", {"a": (("n",), np.arange(5.0))})
    ds = strata.open(path)
    for where, msg in [
        ("t >", "ends too early"),
        ("t > 2 and", "ends too early"),
        ("t ! 2", "cannot parse"),
        ("t > s", "a variable on one side"),
        ("(t > 2", "missing"),
        ("t > 2)", "unexpected"),
        ("nope > 1", "not a variable"),
        ("t > 1 or x > 2", "same dimensions"),
        ("", "empty"),
    ]:
        with pytest.raises(strata.InvalidArgumentError, match=msg):
            ds.query(where, output="count")
    with pytest.raises(strata.InvalidArgumentError, match="output must be"):
        ds.query("t > 1", output="table")
    with pytest.raises(strata.InvalidArgumentError, match="out of range"):
        ds.query("t > 1", isel={"time": 99}, output="count")
    with pytest.raises(strata.InvalidArgumentError, match="no dimension"):
        ds.query("t > 1", isel={"depth": 0}, output="count")
    with pytest.raises(strata.InvalidArgumentError, match="need level V"):
        strata.write_arrays(tmp_path / "n.strata", {"a": (("n",), np.arange(5.0))}, bins=4)
    for binning, msg in [("2,1", "strictly increasing"), ("a,b", "not a number"), ("equal-width", "bin count")]:
        with pytest.raises(strata.InvalidArgumentError, match=msg):
            strata.write_arrays(
                tmp_path / "n.strata", {"a": (("n",), np.arange(5.0))}, layout="V-S", binning=binning, bins=0
            )


def test_damaged_bin_positions_are_corruption(tmp_path):
    path = tmp_path / "c.strata"
    write(path, "V-S")
    for f in sorted((path / "index").iterdir()):
        data = bytearray(f.read_bytes())
        f.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(strata.CorruptionError, match="index file"):
        strata.open(path).query("t > 1", output="count")


@needs_data
def test_real_ersst_values_and_cli(tmp_path, capsys):
    src = DATA / "ersst_v3b_1960-2016_concat.nc"
    store = tmp_path / "e.strata"
    strata.import_file(src, store, layout="V-M-S", bins=12, codec="zstd:3")
    with netCDF4.Dataset(src) as nc:
        sst = nc["sst"][...]  # masked where _FillValue
        lat = nc["lat"][...].data
    ds = strata.open(store)
    ref = ~np.ma.getmaskarray(sst) & (sst.filled(np.nan) > 28)
    assert ds.query("sst > 28", output="count") == ref.sum() > 0
    region = {"lat": slice(-10, 10)}
    got = ds.query("sst > 28", sel=region, output="points", variables=["sst"])
    rows = (lat >= -10) & (lat <= 10)
    want = ref & rows[None, :, None]
    assert len(got) == want.sum()
    np.testing.assert_array_equal(got["sst"].to_numpy(), sst.data[want])
    np.testing.assert_array_equal(got["lat"].to_numpy(), np.broadcast_to(lat[None, :, None], sst.shape)[want])
    # A query over every third record: 3.6M elements, run as several pieces side by side and
    # joined in order, every column equal to NumPy's.
    got = ds.query("sst > 20", isel={"time": slice(1, None, 3)}, output="points")
    sub = sst[1::3]
    t, y, x = np.nonzero(~np.ma.getmaskarray(sub) & (sub.filled(np.nan) > 20))
    assert list(got.columns) == ["time", "lat", "lon", "sst"]
    np.testing.assert_array_equal(got["sst"].to_numpy(), sub.data[t, y, x])
    np.testing.assert_array_equal(got["time"].to_numpy(), np.asarray(ds.coordinate_index("time"))[1::3][t])
    np.testing.assert_array_equal(got["lat"].to_numpy(), lat[y])
    np.testing.assert_array_equal(got["lon"].to_numpy(), np.asarray(ds.coordinate_index("lon"))[x])

    assert main(["query", str(store), "sst", "--where", "sst >= 30", "--output", "count"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == str((~np.ma.getmaskarray(sst) & (sst.filled(np.nan) >= 30)).sum())
    assert "answered from the index" in out.err
    csv = tmp_path / "hot.csv"
    args = ["query", str(store), "sst", "--where", "sst > 29", "--output", "points", "--sel", "lat=-5:5", "-o"]
    assert main([*args, str(csv)]) == 0
    import pandas as pd

    table = pd.read_csv(csv)
    rows = (lat >= -5) & (lat <= 5)
    assert len(table) == (~np.ma.getmaskarray(sst) & (sst.filled(np.nan) > 29) & rows[None, :, None]).sum()
    assert main(["info", str(store)]) == 0
    assert "layout V-M-S, 12 equal-frequency bins" in capsys.readouterr().out
    assert main(["query", str(store), "sst", "--where", "sst >>> 3"]) == 2


def test_query_batches_cut_a_large_member_along_its_next_dimension(tmp_path):
    # An ensemble stored without a record dimension: one member (40 x 200 x 300 = 2.4M
    # values) is more than twice the engine's piece (1M), so it is cut along time where
    # sub-chunks start, keeping row-major order and reading each sub-chunk once.
    import pandas as pd

    rng = np.random.default_rng(5)
    v = rng.normal(size=(3, 40, 200, 300)).astype("f4")
    path = tmp_path / "ens.strata"
    members = np.array(["r1", "r2", "r3"], dtype=object)
    strata.write_arrays(
        path,
        {"member": (("member",), members), "tas": (("member", "time", "y", "x"), v)},
        chunks={"member": 1},
    )
    whole = strata.open(path, cache_bytes=0)
    assert whole.manifest["record_dim"] is None
    want = whole.query("tas > 2.5", method="scan")
    pieced = strata.open(path, cache_bytes=0)
    got = list(pieced.query_batches("tas > 2.5", method="scan"))
    assert len(got) > 3 and all(f["member"].nunique() <= 1 for f in got), len(got)
    pd.testing.assert_frame_equal(pd.concat(got, ignore_index=True), want)
    assert pieced.read_stats()["segments_decoded"] == whole.read_stats()["segments_decoded"]
    assert sum(pieced.query_batches("tas > 2.5", output="count")) == (v > 2.5).sum()
    # Asked for whole members, a piece is a member.
    assert len(list(pieced.query_batches("tas > 2.5", output="count", records=1))) == 3
