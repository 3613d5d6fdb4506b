"""Selection through auxiliary coordinates (2-D curvilinear lat/lon, the 1-D lat/lon of an
unstructured mesh): a mask over the axes they span. Every result equals a NumPy reference."""

import netCDF4
import numpy as np
import pytest

import strata
from conftest import DATA, needs_data
from strata.cli import main
from strata.errors import InvalidArgumentError

SIC = "sic_SImon_CCCma-CanESM5_ssp245_r13i1p2f1_2020.nc"


def source(name):
    nc = netCDF4.Dataset(DATA / name)
    nc.set_auto_maskandscale(False)
    return {n: np.asarray(v[...]) for n, v in nc.variables.items() if v.dtype.kind in "fiu"}


def inside(values, lo, hi):
    return (values >= lo) & (values <= hi)


def on_arc(lon, lo, hi):
    """Longitudes on the arc from `lo` eastward to `hi`, whichever convention either uses."""
    return ((lon - lo) % 360) <= (hi - lo) % 360


@pytest.fixture(scope="module")
def sic(tmp_path_factory):
    out = tmp_path_factory.mktemp("area") / "sic.strata"
    strata.import_file(DATA / SIC, out, layout="V-S", bins=8, subchunks="time=2")
    return strata.open(out), source(SIC)


@needs_data
@pytest.mark.parametrize("method", ["auto", "index", "scan"])
def test_curvilinear_arctic_matches_numpy(sic, method):
    ds, src = sic
    c, lat = src["siconc"], src["latitude"]
    want = (c > 50) & inside(lat, 60, 90)[None]
    sel = {"latitude": slice(60, 90)}
    assert ds.query("siconc > 50", sel=sel, output="count", method=method) == int(want.sum())
    pos = ds.query("siconc > 50", sel=sel, output="positions", method=method)
    for a, b in zip(pos, np.nonzero(want), strict=True):
        np.testing.assert_array_equal(a, b)
    pts = ds.query("siconc > 50", sel=sel, output="points", method=method)
    _, j, i = np.nonzero(want)
    np.testing.assert_array_equal(pts["siconc"].to_numpy(), c[want])
    # The points carry the auxiliary coordinates named by the variable's `coordinates`.
    np.testing.assert_array_equal(pts["latitude"].to_numpy(), lat[j, i])
    np.testing.assert_array_equal(pts["longitude"].to_numpy(), src["longitude"][j, i])
    assert pts["latitude"].min() >= 60


@needs_data
def test_curvilinear_longitude_across_the_dateline_and_dense(sic):
    ds, src = sic
    c, lat, lon = src["siconc"], src["latitude"], src["longitude"]
    area = inside(lat, 50, 1e9) & on_arc(lon, 300, 60)
    want = (c > 15) & area[None]
    sel = {"latitude": (50, None), "longitude": (300, 60)}
    assert ds.query("siconc > 15", sel=sel, output="count") == int(want.sum()) > 0
    dense = ds.query("siconc > 15", sel=sel, output="dense")
    # The region is the area's bounding box; outside the constraint or the area: NaN.
    j, i = np.nonzero(area)
    box = (slice(None), slice(j.min(), j.max() + 1), slice(i.min(), i.max() + 1))
    assert dense.shape == c[box].shape
    np.testing.assert_array_equal(np.isnan(dense), ~want[box])
    np.testing.assert_array_equal(dense[want[box]], c[box][want[box]])


@needs_data
def test_longitude_ranges_in_either_convention(tmp_path):
    # The ocean grid's longitudes run 0..360; a user thinking in -180..180 asks -170, or
    # -30:30 around Greenwich. Both are arcs of the circle, as on a map.
    name = "tos_ocean_bipolar_grid.nc"
    out = tmp_path / "tos.strata"
    strata.import_file(DATA / name, out)
    ds, src = strata.open(out), source(name)
    tos, lat, lon = src["tos"], src["lat"], src["lon"]
    with netCDF4.Dataset(DATA / name) as nc:
        ocean = tos != nc["tos"]._FillValue
    assert lon.min() >= 0 and lon.max() > 300
    for lo, hi in [(170, -170), (-30, 30), (350, 10), (190, 200), (-170, -160)]:
        want = ocean & (tos > 270) & (on_arc(lon, lo, hi) & inside(lat, -10, 10))[None]
        sel = {"lon": (lo, hi), "lat": (-10, 10)}
        assert ds.query("tos > 270", sel=sel, output="count") == int(want.sum()) > 0, (lo, hi)
        got = ds.query("tos > 270", sel=sel, output="positions")
        for a, b in zip(got, np.nonzero(want), strict=True):
            np.testing.assert_array_equal(a, b)
    # (190, 200) and (-170, -160) are the same arc.
    same = [ds.query("tos > 270", sel={"lon": r}, output="count") for r in [(190, 200), (-170, -160)]]
    assert same[0] == same[1] > 0


@needs_data
def test_curvilinear_with_positional_selection_and_streaming(sic):
    ds, src = sic
    c, lat = src["siconc"], src["latitude"]
    want = np.zeros(c.shape, dtype=bool)
    want[1:12:2] = ((c > 50) & inside(lat, -90, -55)[None])[1:12:2]
    kw = dict(isel={"time": slice(1, 12, 2)}, sel={"latitude": (-90, -55)})
    assert ds.query("siconc > 50", output="count", **kw) == int(want.sum()) > 0
    pieces = list(ds.query_batches("siconc > 50", output="positions", records=2, **kw))
    assert len(pieces) > 1
    got = [np.concatenate([p[d] for p in pieces]) for d in range(3)]
    for a, b in zip(got, np.nonzero(want), strict=True):
        np.testing.assert_array_equal(a, b)


@needs_data
def test_unstructured_mesh_coordinates(tmp_path):
    name = "ihesp14.TS.12mon.nc"
    out = tmp_path / "ts.strata"
    strata.import_file(DATA / name, out)
    ds = strata.open(out)
    src = source(name)
    ts, lat, lon = src["TS"], src["lat"], src["lon"]
    # The mesh repeats its seam as 360: those points are at 0 east, so in 0..40.
    assert (lon == 360).any()
    want = (ts > 280) & (inside(lat, 30, 45) & on_arc(lon, 0, 40))[None]
    got = ds.query("TS > 280", sel={"lat": (30, 45), "lon": (0, 40)}, output="positions")
    for a, b in zip(got, np.nonzero(want), strict=True):
        np.testing.assert_array_equal(a, b)


def small_store(path):
    rng = np.random.default_rng(3)
    y, x = np.meshgrid(np.arange(20.0), np.arange(30.0), indexing="ij")
    lat = 40 + y + 0.3 * x  # a rotated grid: no lat range is a range of positions
    lon = x - 0.2 * y
    t = rng.normal(10, 5, size=(8, 20, 30)).astype("f4")
    t[rng.random(t.shape) < 0.2] = np.nan
    strata.write_arrays(
        path,
        {
            "t": (("time", "y", "x"), t, {"coordinates": "lat lon"}),
            "lat": (("y", "x"), lat),
            "lon": (("y", "x"), lon),
            "depth": (("z",), np.arange(3.0)),
        },
        record_dim="time",
        layout="V-S",
        bins=6,
        subchunks="time=2,y=8,x=8",
    )
    return t, lat, lon


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("area") / "small.strata"
    t, lat, lon = small_store(path)
    return path, strata.open(path), t, lat, lon


@pytest.mark.parametrize(
    "sel, isel",
    [
        ({"lat": (45, 52)}, None),
        ({"lat": (45, 52), "lon": (3, 11.5)}, {"x": slice(1, None, 3)}),
        ({"lat": slice(None, 44)}, {"time": 3}),
        ({"lat": (1000, 2000)}, None),  # nothing inside
        ({"lat": (-90, 90)}, None),  # everything inside: no mask at all
    ],
)
def test_generated_grid_matches_numpy(small, sel, isel):
    _, ds, t, lat, lon = small
    area = np.ones(lat.shape, dtype=bool)
    for name, (lo, hi) in ((n, (s.start, s.stop) if isinstance(s, slice) else s) for n, s in sel.items()):
        v = {"lat": lat, "lon": lon}[name]
        area &= inside(v, -np.inf if lo is None else lo, np.inf if hi is None else hi)
    region = np.zeros(t.shape, dtype=bool)
    idx = tuple((isel or {}).get(d, slice(None)) for d in ("time", "y", "x"))
    idx = tuple(slice(i, i + 1) if isinstance(i, int) else i for i in idx)
    region[idx] = True
    want = (t > 12) & area[None] & region
    for output in ("count", "positions", "points"):
        got = ds.query("t > 12", sel=sel, isel=isel, output=output)
        if output == "count":
            assert got == int(want.sum())
        elif output == "positions":
            for a, b in zip(got, np.nonzero(want), strict=True):
                np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_array_equal(got["t"].to_numpy(), t[want])
            np.testing.assert_array_equal(got["lat"].to_numpy(), lat[np.nonzero(want)[1:]])


@pytest.mark.parametrize(
    "sel, message",
    [
        ({"lat": 45}, "range of values"),
        ({"lat": (52, 45)}, "is empty"),
        ({"lat": ("a", 3)}, "must be numbers"),
        ({"lat": slice(1, 5, 2)}, "cannot have a step"),
        ({"depth": (0, 1)}, "neither a dimension"),
    ],
)
def test_bad_area_selections_are_clear(small, sel, message):
    _, ds, *_ = small
    with pytest.raises(InvalidArgumentError, match=message):
        ds.query("t > 12", sel=sel)


def test_cli_selects_through_a_mask(small, capsys):
    path, _, t, lat, _ = small
    want = int(((t > 12) & inside(lat, 45, 52)[None]).sum())
    assert main(["query", str(path), "t", "--where", "t > 12", "--sel", "lat=45:52", "--output", "count"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(want)
    assert main(["explain", str(path), "--where", "t > 12", "--sel", "lat=45:52", "--output", "count"]) == 0
    assert "actual:" in capsys.readouterr().out
    assert main(["query", str(path), "t", "--sel", "lat=45:52"]) != 0
    assert "goes with --where, e.g. --where 't > -inf' for every valid value" in capsys.readouterr().err
    # The suggestion works: every valid value inside the area.
    want = int((np.isfinite(t) & inside(lat, 45, 52)[None]).sum())
    assert main(["query", str(path), "t", "--where", "t > -inf", "--sel", "lat=45:52", "--output", "count"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(want)


@needs_data
def test_sql_joins_the_curvilinear_coordinates(sic):
    # The documented route in SQL: the (j, i) table joined on the dimension columns.
    ds, src = sic
    c, lat = src["siconc"], src["latitude"]
    store = ds.path
    table = strata.sql(
        store,
        "SELECT t.j, t.i, g.latitude, t.siconc FROM sic t JOIN sic_j_i g ON t.j = g.j AND t.i = g.i "
        "WHERE g.latitude > 60 AND t.siconc > 50",
    )
    want = (c > 50) & (lat > 60)[None]
    assert table.num_rows == int(want.sum())
    np.testing.assert_allclose(np.sort(table.column("siconc").to_numpy()), np.sort(c[want]))
    assert table.column("latitude").to_numpy().min() > 60


@needs_data
def test_sql_filters_a_2d_latitude_through_the_area(sic):
    """`WHERE latitude >= 60` on the data's own table: the 2-D latitude is a column of it
    (named by siconc's `coordinates`) and the comparison is the engine's area mask, as
    Dataset.query's sel is; answers equal NumPy's and Dataset.query's."""
    ds, src = sic
    c, lat, lon = src["siconc"], src["latitude"], src["longitude"]
    valid = c < 1e19  # the fill value is NULL in SQL
    for where, area, sel in [
        ("latitude >= 60", lat >= 60, {"latitude": (60, None)}),
        ("latitude <= -60 AND longitude < 100", (lat <= -60) & (lon < 100), None),
        ("latitude BETWEEN 50 AND 70", (lat >= 50) & (lat <= 70), {"latitude": (50, 70)}),
    ]:
        want = (c > 15) & valid & area[None]
        got = strata.sql(ds.path, f"SELECT count(*) AS n FROM sic WHERE {where} AND siconc > 15")["n"][0].as_py()
        assert got == int(want.sum()) > 0, where
        if sel is not None:
            assert ds.query("siconc > 15", sel=sel, output="count") == got
        # Without a value constraint: every valid value in the area.
        n = strata.sql(ds.path, f"SELECT count(siconc) AS n FROM sic WHERE {where}")["n"][0].as_py()
        assert n == int((valid & area[None]).sum()), where
    table = strata.sql(
        ds.path,
        "SELECT time, j, i, latitude, longitude, siconc FROM sic WHERE latitude >= 60 AND siconc > 50 "
        "ORDER BY time, j, i",
    )
    want = (c > 50) & (lat >= 60)[None]
    _, j, i = np.nonzero(want)
    np.testing.assert_array_equal(table.column("j").to_numpy(), j)
    np.testing.assert_array_equal(table.column("i").to_numpy(), i)
    np.testing.assert_array_equal(table.column("latitude").to_numpy(), lat[j, i])
    np.testing.assert_array_equal(table.column("longitude").to_numpy(), lon[j, i])
    np.testing.assert_array_equal(table.column("siconc").to_numpy(), c[want])


@needs_data
def test_points_given_by_position_have_the_same_columns(sic):
    """A points frame built from flat indices (the path of values gathered at their own
    precision levels) has the columns the engine's pieces give: coordinates, auxiliary
    coordinates at each point, values."""
    import pandas as pd

    from strata import query as q

    ds, src = sic
    v = ds["siconc"]
    pts = ds.query("siconc > 50", output="points", isel={"time": slice(0, 3)})
    t = np.searchsorted(np.asarray(ds.coordinate_index("time")), pts["time"].to_numpy())
    flat = np.ravel_multi_index((t, pts["j"].to_numpy(), pts["i"].to_numpy()), v.shape).astype(np.uint64)
    by_position = q._points_at(ds, v, flat, {"siconc": pts["siconc"].to_numpy()})
    pd.testing.assert_frame_equal(by_position, pts)
    _, j, i = np.unravel_index(flat.astype(np.int64), v.shape)
    np.testing.assert_array_equal(by_position["longitude"].to_numpy(), src["longitude"][j, i])
