"""SQL through DataFusion: results equal DuckDB over the same data (from xarray) and NumPy."""

import json

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import strata
from conftest import DATA, needs_data
from strata.cli import main

ERSST = "ersst_v3b_1960-2016_concat.nc"
Q1 = "SELECT lat, lon, sst FROM ersst WHERE sst > 28 AND lat BETWEEN -10 AND 10 AND time >= '2000-01-01'"
Q2 = "SELECT time, avg(sst) AS m FROM ersst WHERE lat > 60 GROUP BY time ORDER BY time"


@pytest.fixture(scope="module")
def ersst(tmp_path_factory):
    """ERSST imported twice (S and V-S layouts) and the xarray reference as a DataFrame."""
    import xarray as xr

    base = tmp_path_factory.mktemp("sql")
    paths = {}
    for layout in ("S", "V-S"):
        paths[layout] = base / f"ersst_{layout.replace('-', '')}.strata"
        strata.import_file(DATA / ERSST, paths[layout], layout=layout, codec="zstd:3")
    with xr.open_dataset(DATA / ERSST) as ds:
        frame = ds["sst"].to_dataframe().reset_index()
    return paths, frame


def duck(sql: str, frame: pd.DataFrame) -> pd.DataFrame:
    con = duckdb.connect()
    con.register("ersst", frame)
    return con.sql(sql).df()


def same_rows(got: pa.Table, want: pd.DataFrame, keys: list[str]) -> None:
    g = got.to_pandas().sort_values(keys).reset_index(drop=True)
    w = want.sort_values(keys).reset_index(drop=True)
    assert list(g.columns) == list(w.columns)
    assert len(g) == len(w)
    for c in g.columns:
        if np.issubdtype(w[c].dtype, np.datetime64):
            np.testing.assert_array_equal(g[c].to_numpy("datetime64[us]"), w[c].to_numpy("datetime64[us]"))
        else:
            np.testing.assert_allclose(g[c].to_numpy(float), w[c].to_numpy(float), rtol=1e-6, equal_nan=True)


@needs_data
@pytest.mark.parametrize("layout", ["S", "V-S"])
@pytest.mark.parametrize("method", ["auto", "index", "scan"])
def test_issue_queries_match_duckdb(ersst, layout, method):
    paths, frame = ersst
    got = strata.sql(paths[layout], Q1, table="ersst", method=method)
    want = duck(Q1, frame)
    assert len(want) > 100
    same_rows(got, want, ["lat", "lon", "sst"])
    got = strata.sql(paths[layout], Q2, table="ersst", method=method)
    want = duck(Q2, frame)
    assert len(got) == 684
    same_rows(got, want, ["time"])


@needs_data
def test_a_session_asked_a_text_again_answers_as_the_first_time(ersst):
    """A session runs a text it has run before from the plan it kept (docs/query.md, *Plans
    kept*): the same answers as DuckDB every time, and a query calling now() is planned
    again, so its time moves on."""
    import time

    paths, frame = ersst
    session = strata.SqlSession(paths["V-S"], table="ersst")
    want1, want2 = duck(Q1, frame), duck(Q2, frame)
    for _ in range(3):
        same_rows(session.execute(Q1), want1, ["lat", "lon", "sst"])
        same_rows(session.execute(Q2), want2, ["time"])
    clock = "SELECT now() AS t, count(*) AS n FROM ersst WHERE sst > 28"
    first = session.execute(clock).column("t")[0].as_py()
    time.sleep(0.01)
    assert session.execute(clock).column("t")[0].as_py() > first


@needs_data
def test_deeply_nested_conditions_plan_or_are_refused_cleanly(ersst):
    """DataFusion's planning crates are built at opt-level 0 (Cargo.toml), whose stack
    frames are larger: a WHERE clause nested as deep as SQL's parser allows must still plan
    and count what DuckDB counts, and a deeper one must be a clear error, not a stack
    overflow that kills the process."""
    paths, frame = ersst

    def nested(depth: int) -> str:
        where = "sst > 1"
        for i in range(depth):
            where = f"({where} AND sst > {i % 20})"
        return f"SELECT count(*) AS n FROM ersst WHERE {where}"

    got = strata.sql(paths["V-S"], nested(45), table="ersst")
    assert got.column("n")[0].as_py() == int(duck(nested(45), frame)["n"][0]) > 0
    with pytest.raises(strata.InvalidArgumentError, match="RecursionLimit"):
        strata.sql(paths["V-S"], nested(200), table="ersst")


@needs_data
def test_whole_empty_null_and_ordered_results(ersst):
    paths, frame = ersst
    # Without the decoded-segment cache: every query decodes what it reads.
    session = strata.SqlSession(paths["V-S"], table="ersst", cache_bytes=0)
    sst = frame["sst"].to_numpy()
    whole = session.execute("SELECT count(*) AS n, count(sst) AS valid, sum(sst) AS s FROM ersst").to_pylist()[0]
    assert whole["n"] == sst.size
    assert whole["valid"] == np.count_nonzero(~np.isnan(sst))
    np.testing.assert_allclose(whole["s"], np.nansum(sst.astype("f8")), rtol=1e-9)
    assert (
        session.execute("SELECT count(*) AS n FROM ersst WHERE sst IS NULL").to_pylist()[0]["n"] == np.isnan(sst).sum()
    )
    empty = session.execute("SELECT time, sst FROM ersst WHERE sst > 100")
    assert empty.num_rows == 0 and empty.column_names == ["time", "sst"]
    assert (
        session.execute("SELECT count(*) AS n FROM ersst WHERE sst > 28").to_pylist()[0]["n"]
        == (np.nan_to_num(sst, nan=-1) > 28).sum()
    )
    top = session.execute("SELECT time, lat, lon, sst FROM ersst ORDER BY sst DESC NULLS LAST LIMIT 5")
    same_rows(top, duck("SELECT time, lat, lon, sst FROM ersst ORDER BY sst DESC NULLS LAST LIMIT 5", frame), ["sst"])
    # Coordinate filters in every form, and value filters with OR, against DuckDB.
    for q in (
        "SELECT time, lat, lon, sst FROM ersst WHERE lon = 180 AND time < '1960-04-01'",
        "SELECT lat, lon, sst FROM ersst WHERE (sst < -1.5 OR sst > 30.5) AND time = '1998-01-15'",
        "SELECT lat, count(*) AS n FROM ersst WHERE 29 <= sst AND lat <> 0 GROUP BY lat",
        "SELECT lat, lon FROM ersst WHERE time BETWEEN '2016-12-01' AND '2017-01-01' AND sst != 0 AND lat > 88",
    ):
        got = session.execute(q)
        want = duck(q, frame)
        same_rows(got, want, list(want.columns))


@needs_data
def test_joins_and_streaming(ersst):
    paths, _ = ersst
    session = strata.SqlSession({"a": paths["S"], "b": paths["V-S"]})
    q = (
        "SELECT a.time, a.m - b.m AS d FROM "
        "(SELECT time, max(sst) AS m FROM a GROUP BY time) a JOIN "
        "(SELECT time, max(sst) AS m FROM b WHERE lat < 0 GROUP BY time) b ON a.time = b.time"
    )
    got = session.execute(q).to_pandas()
    assert len(got) == 684 and (got["d"] >= 0).all()
    reader = session.stream("SELECT * FROM a")
    assert isinstance(reader, pa.RecordBatchReader)
    first = reader.read_next_batch()
    # One piece: about 2^20 elements of the grid (cut where sub-chunks start), of the 11M.
    assert 0 < first.num_rows <= 2 << 20 and first.schema.names == ["time", "lat", "lon", "sst"]
    reader.close()  # the rest of the 11M-row result is never computed


def test_tables_columns_and_errors(tmp_path):
    a = np.arange(24, dtype="f4").reshape(2, 3, 4)
    a[0, 0, 0] = -9
    strata.write_arrays(
        tmp_path / "grid.strata",
        {
            "a": (("t", "y", "x"), a, {"_FillValue": np.float32(-9)}),
            "k": (("t", "y", "x"), np.arange(24, dtype="i4").reshape(2, 3, 4)),
            "h": (("y", "x"), np.ones((3, 4), "f8")),
            "x": (("x",), np.array([10.0, 20.0, 30.0, 40.0])),
            "t": (("t",), np.array([0, 6], "i8"), {"units": "hours since 2001-02-03 04:00:00"}),
        },
        record_dim="t",
    )
    s = strata.SqlSession(tmp_path / "grid.strata")
    assert s.tables == {"grid": ["a", "k"], "grid_t_y_x": ["a", "k"], "grid_y_x": ["h"]}
    t = s.execute("SELECT * FROM grid ORDER BY t, y, x")
    assert t.schema.field("t").type == pa.timestamp("us")
    assert t.schema.field("y").type == pa.int64() and t.schema.field("x").type == pa.float64()
    assert t.column("t").to_pylist()[0] == pd.Timestamp("2001-02-03 04:00").to_pydatetime()
    assert t.column("t").to_pylist()[-1] == pd.Timestamp("2001-02-03 10:00").to_pydatetime()
    assert t.column("a").null_count == 1 and t.column("a").to_pylist()[1] == 1.0
    np.testing.assert_array_equal(t.column("k").to_numpy(), np.arange(24))
    got = s.execute("SELECT x, k FROM grid WHERE x >= 25 AND k % 2 = 0 AND a > 3 ORDER BY k").to_pydict()
    assert got == {"x": [30.0] * 5, "k": [6, 10, 14, 18, 22]}
    # A value selected through another variable keeps its NULL (the fill at a[0, 0, 0]);
    # one the constraint compares on every branch cannot be NULL.
    got = s.execute("SELECT k, a FROM grid WHERE k < 2 OR a > 22 ORDER BY k").to_pydict()
    assert got == {"k": [0, 1, 23], "a": [None, 1.0, 23.0]}
    got = s.execute("SELECT k, a FROM grid WHERE a < 2 OR a > 22 ORDER BY k").to_pydict()
    assert got == {"k": [1, 23], "a": [1.0, 23.0]}
    with pytest.raises(strata.InvalidArgumentError, match="SQL"):
        s.execute("SELEC 1")
    with pytest.raises(strata.InvalidArgumentError, match="nope"):
        s.execute("SELECT * FROM nope")
    with pytest.raises(strata.InvalidArgumentError, match="method"):
        strata.SqlSession(tmp_path / "grid.strata", method="fast")
    with pytest.raises(strata.NotFoundError):
        strata.sql(tmp_path / "missing.strata", "SELECT 1")


@needs_data
def test_names_as_a_user_types_them(tmp_path):
    # WRF names its variables in capitals; SQL folds unquoted names to lower case. A name
    # that matches one column in another case is that column, as in DuckDB.
    import xarray as xr

    wrf = "wrf_katrina_ci_test_file.nc"
    strata.import_file(DATA / wrf, tmp_path / "Katrina-WRF.strata")
    with xr.open_dataset(DATA / wrf) as ds:
        t2, theta = ds["T2"].values, ds["T"].values
    path = tmp_path / "Katrina-WRF.strata"
    # The store's own name quoted, or folded to an identifier: its main table, the one
    # holding the most data (the atmosphere's, with T, the potential temperature less 300 K).
    want = int((theta > 10).sum())
    for table in ['"Katrina-WRF"', "katrina_wrf", "Katrina_WRF"]:
        for where in ["T > 10", "t > 10", '"T" > 10']:
            got = strata.sql(path, f"SELECT count(*) AS n FROM {table} WHERE {where}").to_pydict()
            assert got == {"n": [want]}, (table, where)
    surface = "katrina_wrf_time_south_north_west_east"
    for where in ["T2 > 300", "t2 > 300", '"T2" > 300']:
        got = strata.sql(path, f"SELECT count(*) AS n FROM {surface} WHERE {where}").to_pydict()
        assert got == {"n": [int((t2 > 300).sum())]}, where
    got = strata.sql(path, f"SELECT Time, max(T2) AS hot FROM {surface} GROUP BY Time ORDER BY Time").to_pydict()
    assert got == {"Time": [0, 1, 2, 3], "hot": [float(x) for x in t2.max(axis=(1, 2))]}
    # A surface field asked of the main table: the error names its table.
    with pytest.raises(strata.InvalidArgumentError, match=f"'T2' is a column of table {surface}"):
        strata.sql(path, "SELECT count(*) FROM katrina_wrf WHERE T2 > 300")
    # A variable named as the table: the error gives the query to write.
    with pytest.raises(strata.InvalidArgumentError, match=f"'T2' is a column of table {surface}: SELECT T2 FROM"):
        strata.sql(path, "SELECT avg(T2) FROM T2")
    # Two columns differing only in case: folding decides, and an unknown name still fails.
    strata.write_arrays(tmp_path / "uv.strata", {"U": (("x",), np.arange(3.0)), "u": (("x",), -np.arange(3.0))})
    assert strata.sql(tmp_path / "uv.strata", "SELECT sum(u) AS s FROM uv").to_pydict() == {"s": [-3.0]}
    assert strata.sql(tmp_path / "uv.strata", 'SELECT sum("U") AS s FROM uv').to_pydict() == {"s": [3.0]}
    with pytest.raises(strata.InvalidArgumentError, match="t3"):
        strata.sql(path, "SELECT T3 FROM katrina_wrf")
    # The store's name unquoted does not parse: the error says how to write it.
    with pytest.raises(
        strata.InvalidArgumentError, match='written in double quotes, "Katrina-WRF"; or use katrina_wrf'
    ):
        strata.sql(path, "SELECT count(*) FROM Katrina-WRF WHERE T2 > 300")


def test_a_text_coordinate_is_a_column_of_its_labels(tmp_path):
    # An ensemble's members are named: the column holds the names, as xarray's coordinate
    # does (it held positions), and comparing them works.
    v = np.arange(24.0).reshape(3, 8)
    strata.write_arrays(
        tmp_path / "ens.strata",
        {"member": (("member",), np.array(["B06.57", "B06.59", "B06.60"], dtype=object)), "t": (("member", "x"), v)},
    )
    got = strata.sql(tmp_path / "ens.strata", "SELECT member, sum(t) AS s FROM ens GROUP BY member ORDER BY member")
    assert got.to_pydict() == {"member": ["B06.57", "B06.59", "B06.60"], "s": [28.0, 92.0, 156.0]}
    got = strata.sql(tmp_path / "ens.strata", "SELECT count(*) AS n FROM ens WHERE member = 'B06.59' AND t > 10")
    assert got.to_pydict() == {"n": [5]}
    points = strata.open(tmp_path / "ens.strata").query("t > 21", output="points")
    assert list(points["member"]) == ["B06.60", "B06.60"]


@needs_data
def test_a_model_calendar_time_is_its_dates(tmp_path):
    # CESM's noleap months: the time column holds the calendar's labels as timestamps (it
    # held day numbers, and comparing them with a date was a cast error), so they read,
    # compare and group as the dates xarray's cftime index shows.
    import xarray as xr

    src = DATA / "ihesp14.TS.12mon.nc"
    store = tmp_path / "ts.strata"
    strata.import_file(src, store)
    with xr.open_dataset(src) as ds:  # a noleap calendar: cftime dates
        labels = [d.strftime("%Y-%m-%d") for d in ds["time"].values]
        counts = (ds["TS"] > 290).sum(dim=[d for d in ds["TS"].dims if d != "time"]).values
    got = strata.sql(
        store,
        f"SELECT time, count(*) AS n FROM ts WHERE TS > 290 AND time >= '{labels[3]}' GROUP BY time ORDER BY time",
    )
    assert [t.strftime("%Y-%m-%d") for t in got["time"].to_pylist()] == labels[3:]
    assert got["n"].to_pylist() == [int(n) for n in counts[3:]]
    assert got.schema.field("time").type == pa.timestamp("us")
    got = strata.sql(store, "SELECT extract(month FROM time) AS m, count(*) AS n FROM ts GROUP BY 1 ORDER BY 1")
    assert got["m"].to_pylist() == sorted(int(label[5:7]) for label in labels)
    table = strata.sql(store, "SELECT time FROM ts LIMIT 1")
    assert table.schema.field("time").metadata == {b"calendar": b"noleap"}
    # A 360-day calendar's 30 February has no timestamp: its times stay numbers.
    import netCDF4

    path = tmp_path / "d360.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", 3)
        t = nc.createVariable("time", "f8", ("time",))
        t.units, t.calendar = "days since 2000-01-01", "360_day"
        t[:] = [28.0, 58.0, 59.0]  # 29 January, 29 and 30 February
        nc.createVariable("x", "f4", ("time",))[:] = [1.0, 2.0, 3.0]
    strata.import_file(path, tmp_path / "d360.strata")
    got = strata.sql(tmp_path / "d360.strata", "SELECT time, x FROM d360 ORDER BY time")
    assert got.to_pydict() == {"time": [28.0, 58.0, 59.0], "x": [1.0, 2.0, 3.0]}
    # The standard calendar's Julian dates (before 1582) are labels too, and say so.
    path = tmp_path / "julian.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", 2)
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 1500-03-01"  # no calendar: the standard one, Julian then
        t[:] = [0.0, 1.0]
        nc.createVariable("x", "f4", ("time",))[:] = [1.0, 2.0]
    strata.import_file(path, tmp_path / "julian.strata")
    got = strata.sql(tmp_path / "julian.strata", "SELECT time FROM julian ORDER BY time")
    assert [t.strftime("%Y-%m-%d") for t in got["time"].to_pylist()] == ["1500-03-01", "1500-03-02"]
    assert got.schema.field("time").metadata == {b"calendar": b"standard"}


@pytest.mark.parametrize("method", ["auto", "index", "scan"])
def test_coordinates_of_scattered_points(tmp_path, method):
    """Each point carries the coordinates of its grid position: a time coordinate, a
    coordinate with a NaN (NULL), a dimension without a coordinate variable (its index)."""
    rng = np.random.default_rng(7)
    v = rng.permutation(7 * 5 * 9).astype("f4").reshape(7, 5, 9) / 315
    v[rng.random(v.shape) < 0.1] = np.nan
    y = np.array([-2.0, -1.0, np.nan, 1.0, 2.0])
    x = np.linspace(0, 8, 9) ** 2
    path = tmp_path / "g.strata"
    strata.write_arrays(
        path,
        {
            "v": (("t", "y", "x"), v),
            "t": (("t",), np.arange(7, dtype="i8") * 3, {"units": "days since 1990-01-01"}),
            "y": (("y",), y),
            "x": (("x",), x),
            "w": (("t", "s"), np.arange(14, dtype="i2").reshape(7, 2)),
        },
        record_dim="t",
        chunks={"t": 2},
    )
    got = strata.SqlSession(path, method=method).execute("SELECT t, y, x, v FROM g_t_y_x WHERE v > 0.3")
    ti, yi, xi = np.nonzero(np.nan_to_num(v, nan=-1) > 0.3)
    want = pd.DataFrame(
        {
            "t": pd.Timestamp("1990-01-01") + pd.to_timedelta(ti * 3, unit="D"),
            "y": y[yi],
            "x": x[xi],
            "v": v[ti, yi, xi],
        }
    )
    g = got.to_pandas().sort_values("v").reset_index(drop=True)
    w = want.sort_values("v").reset_index(drop=True)
    assert len(g) == len(w) > 0
    assert got.column("y").null_count == int(np.isnan(y[yi]).sum()) > 0
    pd.testing.assert_frame_equal(g, w, check_dtype=False)
    idx = strata.SqlSession(path, method=method).execute("SELECT t, s, w FROM g_t_s WHERE w % 3 = 1").to_pandas()
    assert idx["s"].tolist() == [int(k) % 2 for k in idx["w"]]


def test_damaged_store_is_corruption(tmp_path):
    path = tmp_path / "d.strata"
    strata.write_arrays(path, {"v": (("t", "x"), np.random.default_rng(0).normal(size=(40, 500)))}, record_dim="t")
    for f in sorted((path / "data").glob("*")):
        raw = bytearray(f.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        f.write_bytes(bytes(raw))
    with pytest.raises(strata.CorruptionError, match=r"^corrupt store: segment"):
        strata.sql(path, "SELECT sum(v) FROM d")


@needs_data
def test_cli_sql_and_explain(ersst, tmp_path, capsys, monkeypatch):
    paths, frame = ersst
    monkeypatch.setenv("STRATA_COST_MODEL", str(tmp_path / "model.json"))
    store = str(paths["V-S"])
    assert main(["sql", store, "--tables"]) == 0
    assert "ersst_vs: sst" in capsys.readouterr().out
    out = tmp_path / "q2.csv"
    assert main(["sql", store, Q2.replace("ersst", "ersst_vs"), "-o", str(out)]) == 0
    got = pd.read_csv(out)
    want = duck(Q2, frame)
    np.testing.assert_allclose(got["m"].to_numpy(), want["m"].to_numpy(), rtol=1e-6)
    pq = tmp_path / "q1.parquet"
    assert main(["sql", store, Q1.replace("ersst", "ersst_vs"), "-o", str(pq), "--plan", "scan"]) == 0
    assert len(pd.read_parquet(pq)) == len(duck(Q1, frame))
    assert main(["sql", store, "SELECT count(*) AS n FROM ersst_vs WHERE sst > 28"]) == 0
    assert str((np.nan_to_num(frame["sst"].to_numpy(), nan=-1) > 28).sum()) in capsys.readouterr().out
    assert main(["sql", store, "SELECT nothing FROM ersst_vs"]) == 2
    assert "error" in capsys.readouterr().err
    assert main(["explain", store, "--where", "sst > 28", "--sel", "lat=-10:10"]) == 0
    text = capsys.readouterr().out
    assert "built-in defaults" in text and "choice" in text and "actual:" in text
    assert main(["calibrate", "--quick", "--repeats", "1", "--quiet"]) == 0
    assert "wrote" in capsys.readouterr().out and (tmp_path / "model.json").exists()
    model = json.loads((tmp_path / "model.json").read_text())
    assert model["ns"].keys() == model["scan_ns"].keys() and all(v >= 0 for v in model["scan_ns"].values())
    assert main(["explain", store, "--where", "sst > 28", "--no-run", "--output", "count"]) == 0
    assert "calibrated" in capsys.readouterr().out


@needs_data
@pytest.mark.parametrize("method", ["auto", "index", "scan"])
def test_packed_variables_are_physical_values(tmp_path, method):
    """NorKyst's temperature is a short with scale_factor 0.01: SQL's column holds degrees,
    as xarray decodes them (float32), and `WHERE temperature > 10` compares degrees."""
    import xarray as xr

    path = DATA / "NorKyst-800m_ZDEPTHS_his_00_3Dsubset.nc"
    store = tmp_path / "norkyst.strata"
    strata.import_file(path, store)
    with xr.open_dataset(path, decode_times=False) as ds:
        t = ds["temperature"].values  # float32, NaN at the fill
    s = strata.SqlSession(store, method=method)
    table = next(name for name, cols in s.tables.items() if "temperature" in cols)
    assert s.execute(f"SELECT temperature FROM {table} LIMIT 1").schema.field(0).type == pa.float32()
    for where, want in [
        ("temperature > 10", t > 10),
        ("temperature >= 7.5 AND temperature < 8", (t >= 7.5) & (t < 8)),
        ("temperature = 7.5", t == np.float32(7.5)),
        ("temperature <= 2 OR temperature > 14.25", (t <= 2) | (t > np.float32(14.25))),
    ]:
        got = s.execute(f"SELECT count(*) AS n FROM {table} WHERE {where}").column("n")[0].as_py()
        assert got == int(want.sum()) > 0, where
        vals = s.execute(f'SELECT temperature FROM {table} WHERE {where} ORDER BY time, depth, "Y", "X"')
        np.testing.assert_array_equal(vals.column(0).to_numpy(), t[want], err_msg=where)
    # Values the constraint does not compare are physical too, NULL at the fill.
    some = s.execute(f'SELECT temperature FROM {table} WHERE depth = 0 ORDER BY time, "Y", "X"').column(0)
    want = t[:, list(ds_depths(path)).index(0.0)].ravel()
    assert some.null_count == int(np.isnan(want).sum()) > 0
    np.testing.assert_array_equal(some.to_numpy(zero_copy_only=False), want)


def ds_depths(path):
    import netCDF4

    with netCDF4.Dataset(path) as nc:
        return nc["depth"][:].tolist()


def test_session_options_out_of_range_are_clear_errors(tmp_path):
    """A negative or astronomic cache size or partition count is refused by name (each
    was a Python OverflowError from the engine's binding)."""
    strata.write_arrays(tmp_path / "g.strata", {"a": (("x",), np.arange(6, dtype="f4"))})
    for kw, words in [
        ({"cache_bytes": -1}, "cache_bytes is a number of bytes"),
        ({"cache_bytes": 10**30}, "cache_bytes is a number of bytes"),
        ({"partitions": -1}, "partitions must be 1 to 1024"),
        ({"partitions": 10**30}, "partitions must be 1 to 1024"),
    ]:
        with pytest.raises(strata.errors.InvalidArgumentError, match=words):
            strata.SqlSession(tmp_path / "g.strata", **kw)
    with pytest.raises(strata.errors.InvalidArgumentError, match="cache_bytes"):
        strata.open(tmp_path / "g.strata", cache_bytes=-5)
    assert strata.SqlSession(tmp_path / "g.strata", partitions=2, cache_bytes=0).execute("SELECT count(*) AS n FROM g")[
        "n"
    ].to_pylist() == [6]


@needs_data
def test_a_mesh_field_is_the_main_table_with_its_latitude_as_a_column(tmp_path):
    # CESM on its spectral-element mesh: PRECC(time, ncol) beside lat(ncol), lon(ncol), which
    # no attribute names as its coordinates, and eleven scalar series along time. The store's
    # table is PRECC's, and a latitude range filters it through lat, as NumPy does.
    import netCDF4

    src = DATA / "ihesp14.PRECC.12mon.nc"
    path = tmp_path / "precc.strata"
    strata.import_file(src, path)
    with netCDF4.Dataset(src) as nc:
        lat, precc = nc["lat"][:].data, nc["PRECC"][:].data
    assert strata.SqlSession(path).tables["precc"] == ["PRECC"]
    got = strata.sql(path, "SELECT count(*) AS n, sum(PRECC) AS s FROM precc WHERE lat > 60").to_pydict()
    north = precc[:, lat > 60]
    assert got["n"] == [north.size]
    assert got["s"][0] == pytest.approx(float(north.astype("f8").sum()), rel=1e-6)
