"""The Rust engine as the front ends see it: one constraint grammar, one session shared by
Dataset.query and SQL, constraints as users write them (not, quoted names, packed values),
selections typed on the command line, and SQL tables a user can find."""

import numpy as np
import pyarrow as pa
import pytest
import xarray as xr

import strata
from strata.cli import main

RNG = np.random.default_rng(3)
SHAPE = (12, 16, 20)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("engine") / "e.strata"
    t = RNG.normal(15, 6, SHAPE).astype("f4")
    t[RNG.random(SHAPE) < 0.1] = np.nan
    ice = RNG.random(SHAPE).astype("f4")
    packed = RNG.integers(-3000, 3000, SHAPE).astype("i2")
    strata.write_arrays(
        path,
        {
            "t": (("time", "y", "x"), t),
            "sea ice": (("time", "y", "x"), ice),
            "p": (("time", "y", "x"), packed, {"scale_factor": np.float64(-0.01), "add_offset": np.float64(5.0)}),
            "time": (("time",), np.arange(12.0) * 6, {"units": "hours since 2019-03-01", "calendar": "standard"}),
            "y": (("y",), np.linspace(-60, 60, 16)),
        },
        record_dim="time",
        layout="V-S",
        bins=8,
        slab_records=4,
    )
    return path, t, ice, packed


def test_not_and_quoted_names_equal_numpy(store):
    path, t, ice, _ = store
    ds = strata.open(path)
    valid = ~np.isnan(t)
    cases = {
        "not t > 15": valid & ~(t > 15),
        'not (t > 15 or "sea ice" < 0.5)': valid & ~((t > 15) | (ice < 0.5)),
        "`sea ice` >= 0.9 and t < 10": (ice >= 0.9) & (t < 10),
    }
    for where, ref in cases.items():
        for method in ("auto", "index", "scan"):
            assert ds.query(where, output="count", method=method) == ref.sum(), (where, method)
            got = ds.query(where, output="positions", method=method)
            for a, b in zip(got, np.nonzero(ref), strict=True):
                np.testing.assert_array_equal(a, b)
    # The canonical text reads back to the same constraint.
    c = strata.parse_where('not (t > 1 and "sea ice" <= 2)')
    assert str(strata.parse_where(str(c))) == str(c) == 't <= 1.0 or "sea ice" > 2.0'
    assert c.variables == ["t", "sea ice"]


def test_packed_variables_compare_physical_values_as_xarray_shows_them(store):
    path, _, _, packed = store
    ds = strata.open(path)
    physical = xr.open_dataset(path, engine="strata")["p"].values
    np.testing.assert_allclose(physical, packed * -0.01 + 5.0, rtol=1e-6)
    for where, ref in {
        "p > 7.505": physical > 7.505,
        "p <= 2.005 or p > 34.995": (physical <= 2.005) | (physical > 34.995),
    }.items():
        assert ds.query(where, output="count") == ref.sum() > 0
    # raw=True compares the stored integers.
    assert ds.query("p > 2000", output="count", raw=True) == (packed > 2000).sum()
    assert ds.query("p > 2000", output="count") == 0


def test_unsigned_flags_compare_the_values_xarray_reads(tmp_path):
    """NetCDF-3 has no unsigned types: unsigned bytes are stored signed and flagged
    `_Unsigned = "true"`. Constraints compare the unsigned values xarray decodes (stored
    -39 reads 217), in Dataset.query and SQL, whose column holds them too; raw=True
    compares the stored ones. The same for 16-bit integers packed by a scale."""
    u = RNG.integers(0, 256, SHAPE).astype("u1")
    w = RNG.integers(0, 65536, SHAPE).astype("u2")
    path = tmp_path / "q.strata"
    strata.write_arrays(
        path,
        {
            "q": (("time", "y", "x"), u.view("i1"), {"_Unsigned": "true", "_FillValue": np.int8(-1)}),
            "w": (("time", "y", "x"), w.view("i2"), {"_Unsigned": "true", "scale_factor": np.float32(0.5)}),
        },
        record_dim="time",
        layout="V-S",
        bins=8,
        slab_records=4,
    )
    with xr.open_dataset(path, engine="strata") as x:
        q, wp = x["q"].values, x["w"].values
    valid = u != 255
    np.testing.assert_array_equal(q[valid], u[valid])
    np.testing.assert_array_equal(wp, w * 0.5)
    ds = strata.open(path)
    cases = {
        "q > 200": valid & (u > 200),
        "q <= 3 or q == 128": valid & ((u <= 3) | (u == 128)),
        "not q < 250": valid & (u >= 250),
        "w >= 20000.5 and q != 7": (wp >= 20000.5) & valid & (u != 7),
    }
    for where, ref in cases.items():
        for method in ("auto", "index", "scan"):
            assert ds.query(where, output="count", method=method) == ref.sum() > 0, (where, method)
        got = ds.query(where, output="positions")
        for a, b in zip(got, np.nonzero(ref), strict=True):
            np.testing.assert_array_equal(a, b)
    assert ds.query("q < 0", output="count", raw=True) == (valid & (u > 127)).sum()
    assert ds.query("q < 0", output="count") == 0
    s = strata.SqlSession(path)
    assert s.execute("SELECT q FROM q LIMIT 1").schema.field(0).type == pa.uint8()
    for where, ref in [("q > 200", valid & (u > 200)), ("w > 30000", w * 0.5 > 30000)]:
        got = s.execute(f"SELECT q, w FROM q WHERE {where} ORDER BY time, y, x")
        np.testing.assert_array_equal(got.column("q").to_numpy(zero_copy_only=False), q[ref], err_msg=where)
        np.testing.assert_array_equal(got.column("w").to_numpy(), wp[ref], err_msg=where)


def test_dataset_query_and_sql_learn_in_one_session(store):
    path, t, _, _ = store
    ds = strata.open(path)
    session = strata.session()
    before = session.run_count()
    assert ds.query("t > 20", output="count") == (t > 20).sum()
    table = strata.sql(path, "SELECT count(*) AS n FROM e WHERE t > 20")
    assert table["n"][0].as_py() == (t > 20).sum()
    runs = session.runs(before)
    assert session.run_count() == before + len(runs) and len(runs) > 1
    assert {m for m, _, _ in runs} <= {"index", "scan"}


def test_explain_prints_the_engines_plan_and_actuals(store, capsys):
    path, t, _, _ = store
    assert main(["explain", str(path), "--where", "not t <= 20", "--output", "count"]) == 0
    out = capsys.readouterr().out
    assert "query: t > 20.0" in out
    assert "est. selected" in out and "plan: " in out
    assert f"actual: {(t > 20).sum()} selected" in out


def test_cli_selections_as_typed(store, capsys):
    path, t, _, _ = store
    # A colon inside a time of day is not a range separator.
    out = path.parent / "one.npy"
    assert main(["query", str(path), "t", "--sel", "time=2019-03-01T06:00", "-o", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out), t[1])
    assert main(["query", str(path), "t", "--sel", "time=2019-03-01T06:00:2019-03-01T18:00", "-o", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out), t[1:4])
    for argv, message in [
        (["--sel", "time=yesterday"], "not a date"),
        (["--sel", "y=north:10"], "not a number"),
        (["--isel", "time=0:10:0"], "step must be a positive integer"),
    ]:
        capsys.readouterr()
        assert main(["query", str(path), "t", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err


def test_sql_table_of_a_variable_is_found_or_named(tmp_path):
    path = tmp_path / "aux.strata"
    pr = RNG.random((4, 5, 6)).astype("f4")
    zg = RNG.random((4, 3, 5, 6)).astype("f4")
    strata.write_arrays(
        path,
        {
            "pr": (("time", "y", "x"), pr, {"coordinates": "zg"}),
            "tas": (("time", "y", "x"), pr * 2),
            "zg": (("time", "lev", "y", "x"), zg),
        },
        record_dim="time",
    )
    # The store's table is the data variables' group, though zg's group is larger.
    assert strata.SqlSession(path).tables["aux"] == ["pr", "tas"]
    n = strata.sql(path, "SELECT count(*) AS n FROM aux WHERE pr > 0.5")["n"][0].as_py()
    assert n == (pr > 0.5).sum()
    with pytest.raises(strata.InvalidArgumentError, match="'zg' is a column of table aux_time_lev_y_x"):
        strata.sql(path, "SELECT count(*) FROM aux WHERE zg > 0.5")


def test_an_area_is_the_engines_mask_and_sub_chunks_outside_it_are_not_read(tmp_path):
    """A disc of a curvilinear grid: counts equal NumPy's by every method, and the query
    through the disc reads fewer sub-chunks than the same query over its bounding box."""
    ny, nx = 64, 64
    yy, xx = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    r = np.hypot(yy - 31.5, xx - 31.5)
    lat = (90 - r).astype("f8")  # a polar cap: latitude falls away from the centre
    v = RNG.normal(0, 1, (6, ny, nx)).astype("f4")
    path = tmp_path / "disc.strata"
    strata.write_arrays(
        path,
        {"v": (("time", "y", "x"), v, {"coordinates": "lat"}), "lat": (("y", "x"), lat)},
        record_dim="time",
        layout="V-S",
        bins=8,
        subchunks="time=2,y=8,x=8",
    )
    ds = strata.open(path, cache_bytes=0)
    disc = lat >= 70
    want = ((v > 0.5) & disc[None]).sum()
    sel = {"lat": (70, None)}
    for method in ("auto", "index", "scan"):
        n = ds.query("v > 0.5", sel=sel, output="count", method=method)
        assert n == want, method
        pos = ds.query("v > 0.5", sel=sel, output="positions", method=method)
        for a, b in zip(pos, np.nonzero((v > 0.5) & disc[None]), strict=True):
            np.testing.assert_array_equal(a, b)
    rows, cols = np.nonzero(disc)
    box = {"y": slice(rows.min(), rows.max() + 1), "x": slice(cols.min(), cols.max() + 1)}
    _, in_box = ds.query("v > 0.5", isel=box, output="count", method="scan", with_stats=True)
    _, in_disc = ds.query("v > 0.5", sel=sel, output="count", method="scan", with_stats=True)
    assert in_disc["subchunks"] < in_box["subchunks"], (in_disc, in_box)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("{tmp}/busy", "is not empty and holds no strata store"),
        # Refused from its top level: walking it read all of / and failed in /proc.
        ("/", "is not empty and holds no strata store"),
        ("", "needs a path"),
        ("s3://bucket/x", "URL scheme 's3' is not supported yet"),
    ],
)
def test_a_store_is_never_written_where_it_does_not_belong(tmp_path, capsys, target, message):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("keep me")
    target = target.format(tmp=tmp_path)
    with pytest.raises(strata.InvalidArgumentError, match=message):
        strata.write_arrays(target, {"a": (("n",), np.arange(3.0))})
    assert (tmp_path / "busy" / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in (tmp_path / "busy").iterdir()) == ["notes.txt"]
    assert not (tmp_path / "s3:").exists()


def test_cli_bad_version_and_missing_output_directory_are_one_line_errors(store, capsys):
    path, *_ = store
    for argv, message in [
        (["query", str(path), "t", "--at", "-1", "--isel", "time=0"], "positive integer"),
        (["query", str(path), "t", "--isel", "time=0", "-o", "/nonexistent/dir/x.npy"], "no such directory"),
        # netCDF's own error for a missing directory read 'Permission denied'.
        (["query", str(path), "t", "--isel", "time=0", "-o", "/nonexistent/dir/x.nc"], "no such directory"),
    ]:
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_log_of_a_store_missing_a_manifest_is_a_corruption_error(tmp_path, capsys):
    path = tmp_path / "m.strata"
    strata.write_arrays(path, {"a": (("n",), np.arange(3.0))})
    (next((path / "manifests").glob("*.json"))).unlink()
    assert main(["log", str(path)]) == 2
    err = capsys.readouterr().err
    assert "manifest is missing" in err and "v00000001.json" in err and "Traceback" not in err, err
