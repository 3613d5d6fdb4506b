"""Automatic codec plans at import, recorded in the manifest, and re-checked on append."""

import json

import netCDF4
import numpy as np
import pytest

import strata
from conftest import DATA, assert_bit_equal, needs_data, raw_source
from strata.analyze import candidates_for
from strata.cli import main


def big_nc(path, times, seed=0, nlat=60, nlon=80):
    """A smooth field (compressible, like real ones), 60 x 80 per record, f32."""
    times = list(times)
    rng = np.random.default_rng(seed)
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", nlat)
        nc.createDimension("lon", nlon)
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t[:] = times
        nc.createVariable("lat", "f4", ("lat",))[:] = np.linspace(-60, 60, nlat)
        v = nc.createVariable("temp", "f4", ("time", "lat", "lon"))
        tt, yy, xx = np.meshgrid(np.asarray(times, "f8"), np.arange(nlat), np.arange(nlon), indexing="ij")
        field = 20 * np.cos(yy / 20) + 5 * np.sin(xx / 9 + tt / 10) + rng.normal(0, 0.01, tt.shape)
        v[:] = np.round(field, 2).astype("f4")
    return path


def test_auto_import_records_the_plan_and_uses_its_choice(tmp_path):
    nc = big_nc(tmp_path / "a.nc", range(40))
    strata.import_file(nc, tmp_path / "a.strata", objective="ratio")
    ds = strata.open(tmp_path / "a.strata")
    plan = ds["temp"].plan
    assert plan["objective"] == "ratio"
    assert plan["chosen"] == max(plan["scores"], key=lambda s: s["ratio"])["chain"]
    assert ds["temp"].chains[0] == plan["chosen"]
    assert ds["lat"].plan is None, "small variables keep the default chain"
    assert ds["lat"].chains[0] == "shuffle+zstd:3"
    with raw_source(nc) as src:
        assert_bit_equal(ds["temp"][...], src["temp"][...])


def test_append_switches_chain_when_drift_makes_another_clearly_better(tmp_path):
    store = tmp_path / "s.strata"
    strata.import_file(big_nc(tmp_path / "a.nc", range(40)), store, codec="raw")
    # The ratio objective depends on no timing, so the decision is deterministic.
    report = strata.append_file(big_nc(tmp_path / "b.nc", range(40, 80), seed=1), store, objective="ratio")
    ds = strata.open(store)
    codecs = ds["temp"].codecs
    assert len(codecs) == 2 and codecs[0] == [{"name": "raw"}]
    plan = ds["temp"].plan
    assert plan["previous"] == "raw" and plan["gain"] >= 1.10
    # Old slabs keep raw, new ones use the new chain: both read back exactly.
    with raw_source(tmp_path / "a.nc") as a, raw_source(tmp_path / "b.nc") as b:
        assert_bit_equal(ds["temp"][...], np.concatenate([a["temp"][...], b["temp"][...]]))
    manifest = json.loads((store / "manifests" / "v00000002.json").read_text())
    assert report.version == 2 and manifest["variables"][-1]["name"] == "temp"


def test_append_keeps_the_chain_without_drift_or_when_asked(tmp_path):
    store = tmp_path / "s.strata"
    strata.import_file(big_nc(tmp_path / "a.nc", range(40)), store, objective="ratio")
    before = strata.open(store)["temp"].codecs
    # Same distribution: the ratio objective (timing-free, so deterministic) sees no 10% gain.
    strata.append_file(big_nc(tmp_path / "b.nc", range(40, 80), seed=1), store)
    assert strata.open(store)["temp"].codecs == before
    raw_store = tmp_path / "r.strata"
    strata.import_file(big_nc(tmp_path / "c.nc", range(40)), raw_store, codec="raw")
    assert main(["append", "-q", "--keep-codecs", str(raw_store), str(tmp_path / "b.nc")]) == 0
    assert strata.open(raw_store)["temp"].codecs == [[{"name": "raw"}]]


@needs_data
def test_a_small_variable_keeps_its_slower_chain_when_appended_to(tmp_path):
    # Nordic-4km's ice fields (3 records, 147 KB) are stored whole with zstd level 9, which
    # only a variable that small may take (its encoding floor is 125 MB/s, not 150): the
    # check on appended records holds them to the same floor, instead of replacing a chain
    # it would not have admitted (a "gain" of 600,825x was recorded that way).
    src = DATA / "Nordic-4km_SLEVELS_avg_00_subset2Feb2016.nc"
    store = tmp_path / "n.strata"
    strata.import_file(src, store)
    plan = strata.open(store)["aice"].plan
    assert (plan["chosen"], plan["scale"]) == ("delta:0+shuffle+zstd:9", "small")
    assert strata.open(store)["temp"].plan["scale"] == "stream"
    strata.append_file(src, store, allow_unordered=True)
    ds = strata.open(store)
    for name in ("aice", "hice"):
        assert ds[name].chains == ["delta:0+shuffle+zstd:9"], ds[name].plan
    with raw_source(src) as nc:
        once = nc["aice"][...]
    assert_bit_equal(ds["aice"][...], np.concatenate([once, once]))


def test_unknown_objective_is_rejected(tmp_path):
    with pytest.raises(strata.InvalidArgumentError, match="unknown objective"):
        strata.import_file(big_nc(tmp_path / "a.nc", range(3)), tmp_path / "x.strata", objective="fast")


def test_info_shows_the_chain_in_use(tmp_path, capsys):
    store = tmp_path / "s.strata"
    strata.import_file(big_nc(tmp_path / "a.nc", range(40)), store, codec="raw")
    assert (
        main(["append", "-q", "--objective", "ratio", str(store), str(big_nc(tmp_path / "b.nc", range(40, 80)))]) == 0
    )
    capsys.readouterr()
    assert main(["info", str(store)]) == 0
    out = capsys.readouterr().out
    assert "(+1 earlier)" in out
    # The table's columns line up whatever the chain's length: every row ends where the header does.
    table = out.split("storage (values from the index alone):\n")[1].splitlines()
    rows = [line for line in table if line.strip() and not line.strip().startswith("total:")]
    assert len(rows) > 2 and len({len(r) for r in rows}) == 1, "\n".join(rows)


@needs_data
def test_write_arrays_auto_gets_the_importers_plan(tmp_path):
    """One planner for every writer: ERSST through write_arrays(codec="auto") and through
    import get the same chain and the same size."""
    src = DATA / "ersst_v3b_1960-2016_concat.nc"
    strata.import_file(src, tmp_path / "i.strata", objective="ratio")
    imported = strata.open(tmp_path / "i.strata")
    with raw_source(src) as nc:
        arrays = {name: (v.dimensions, v[...]) for name, v in nc.variables.items() if v.dtype != str}
        record_dim = "time"
    strata.write_arrays(tmp_path / "w.strata", arrays, record_dim=record_dim, codec="auto", objective="ratio")
    written = strata.open(tmp_path / "w.strata")
    assert written["sst"].codecs == imported["sst"].codecs
    assert written["sst"].plan == imported["sst"].plan
    a, b = (d.stats()["sst"]["stored_bytes"] for d in (imported, written))
    assert abs(a - b) <= 0.01 * a
    assert_bit_equal(written["sst"][...], imported["sst"][...])


def test_a_variable_the_default_chain_would_grow_is_stored_raw(tmp_path):
    """Too small to plan, a variable is stored with the default chain unless that makes it
    larger: a scalar's 8 bytes took 17 in a zstd frame. A chain asked for is kept."""
    arrays = {
        "scalar": ((), np.array(2.5)),
        "pair": (("two",), np.array([7, 9], dtype="i4")),
        "coord": (("n",), np.linspace(-90, 90, 500)),
        "noise": (("m",), np.random.default_rng(3).integers(0, 256, 64, dtype="u1")),
    }
    strata.write_arrays(tmp_path / "auto.strata", arrays, codec="auto")
    strata.write_arrays(tmp_path / "asked.strata", arrays, codec="shuffle+zstd:3")
    auto, asked = strata.open(tmp_path / "auto.strata"), strata.open(tmp_path / "asked.strata")
    stats = auto.stats()
    for name, (_, arr) in arrays.items():
        assert_bit_equal(auto[name][...], arr, name)
        assert stats[name]["stored_bytes"] <= arr.nbytes, name
    assert [auto[n].chains[-1] for n in ("scalar", "pair", "noise")] == ["raw"] * 3
    assert auto["coord"].chains[-1] == "shuffle+zstd:3"
    assert all(asked[n].chains[-1] == "shuffle+zstd:3" for n in arrays)
    assert asked.stats()["scalar"]["stored_bytes"] > 8


@needs_data
def test_default_plans_are_reproducible_and_not_larger_than_netcdf4_zlib(tmp_path):
    """The default (balanced) plan depends on the data only, and on ERSST stores no more
    than netCDF4 zlib-4 + shuffle would."""
    src = DATA / "ersst_v3b_1960-2016_concat.nc"
    plans = []
    for name in ("a", "b"):
        strata.import_file(src, tmp_path / f"{name}.strata")
        plans.append(strata.open(tmp_path / f"{name}.strata")["sst"].plan)
    assert plans[0] == plans[1]
    with raw_source(src) as nc:
        sst = nc["sst"][...]
    with netCDF4.Dataset(tmp_path / "z.nc", "w") as z:
        for i, n in enumerate(sst.shape):
            z.createDimension(f"d{i}", n)
        v = z.createVariable("v", sst.dtype, [f"d{i}" for i in range(sst.ndim)], zlib=True, complevel=4, shuffle=True)
        v.set_auto_maskandscale(False)
        v[...] = sst
    stored = strata.open(tmp_path / "a.strata").stats()["sst"]["stored_bytes"]
    assert stored <= (tmp_path / "z.nc").stat().st_size


def _alone(path, name, arr, dims, **kw):
    """``arr`` as the only variable of a NetCDF-4 file (what bench/bench_import.py imports)."""
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        for d, n in zip(dims, arr.shape, strict=True):
            nc.createDimension(d, n)
        v = nc.createVariable(name, arr.dtype, dims, **kw)
        v.set_auto_maskandscale(False)
        v[...] = arr
    return path


def _imported_beside_zlib(tmp_path, file, name):
    """One variable of a real file, alone: the array, the store its default import makes
    from an uncompressed copy, and the bytes netCDF4 zlib 4 + shuffle stores it in (HDF5's
    storage size, no header)."""
    import h5py

    with raw_source(DATA / file) as nc:
        v = nc[name]
        arr, dims = np.ascontiguousarray(v[...]), v.dimensions
    src = _alone(tmp_path / "src.nc", name, arr, dims)
    zlib = _alone(tmp_path / "zlib.nc", name, arr, dims, zlib=True, complevel=4, shuffle=True)
    with h5py.File(zlib, "r") as f:
        zlib_bytes = f[name].id.get_storage_size()
    strata.import_file(src, tmp_path / "s.strata")
    return arr, strata.open(tmp_path / "s.strata"), zlib_bytes


@needs_data
@pytest.mark.parametrize(
    "file,name",
    [
        ("NorKyst-800m_ZDEPTHS_his_00_3Dsubset.nc", "temperature"),
        ("Nordic-4km_SLEVELS_avg_00_subset2Feb2016.nc", "u"),
        ("rectilinear_grid_3D.nc", "var3"),
    ],
)
def test_the_default_plan_stores_no_more_than_netcdf4_zlib(tmp_path, file, name):
    """A person converting an archive must not see it grow: the default import stores the
    variable in no more bytes than netCDF4's zlib 4 + shuffle (HDF5's storage size, no
    header). These variables' plans store each byte plane of a row-wise residual alone
    (``xor:-1``/``delta:-1`` + ``bytecols``); ``var3`` was 5% larger without them."""
    arr, ds, zlib_bytes = _imported_beside_zlib(tmp_path, file, name)
    assert ds[name].plan["objective"] == "balanced"
    stored = ds.stats()[name]["stored_bytes"]
    assert stored <= zlib_bytes, f"{name}: {stored} bytes with {ds[name].plan['chosen']}, netCDF4 zlib {zlib_bytes}"
    assert_bit_equal(ds[name][...], arr, name)


@needs_data
@pytest.mark.parametrize(
    "file,name",
    [
        ("cth_shock_physics.nc", "Pressure"),
        ("sic_SImon_CCCma-CanESM5_ssp245_r13i1p2f1_2020.nc", "vertices_latitude"),
        ("sic_SImon_CCCma-CanESM5_ssp245_r13i1p2f1_2020.nc", "siconc"),
    ],
)
def test_balanced_writes_quickly_what_still_beats_netcdf4(tmp_path, file, name):
    """On compressible fields the default plan takes the quickest chain (declared) that stores
    15% less than netCDF4's zlib 4 + shuffle on its sample, having tried every chain as quick
    and none slower; the whole variable still takes fewer bytes than netCDF4's, and reads
    back bit-exact."""
    arr, ds, zlib_bytes = _imported_beside_zlib(tmp_path, file, name)
    plan = ds[name].plan
    scores = {s["chain"]: s for s in plan["scores"]}
    chosen = scores[plan["chosen"]]
    assert chosen["ratio"] >= 1.15 * plan["reference"], plan
    speed = chosen["encode_mb_s"]
    # Only what the rule needs was tried: every chain as quick as the choice, none slower.
    assert all(s["encode_mb_s"] >= speed for s in plan["scores"]), plan
    assert len(plan["scores"]) < len(candidates_for(ds[name].dtype_name)) // 2, plan
    quicker = [s for s in plan["scores"] if s["encode_mb_s"] > speed]
    assert all(s["ratio"] < 1.15 * plan["reference"] for s in quicker), plan
    assert ds.stats()[name]["stored_bytes"] <= zlib_bytes
    assert_bit_equal(ds[name][...], arr, name)


@needs_data
@pytest.mark.parametrize(
    "file,name,whole",
    [
        # 389 KiB of cell areas on an icosahedral grid: a few thousand values repeat across
        # the array, which 64 KiB blocks cannot see (2.5x netCDF4's size in blocks).
        ("ihesp14.TS.12mon.nc", "area", True),
        # WRF's base-state pressure, the same at three of four times (2.4x in blocks).
        ("wrf_katrina_ci_test_file.nc", "PB", True),
        # A 2-D longitude that pcodec compresses better in blocks: it stays in blocks.
        ("pop.nc", "lon2d", False),
        # 32 KiB, planned since it is over 16 KiB (shuffle+zstd:3 unplanned: 1.069x).
        ("NCEP_06_climo.nc", "FLUT", True),
    ],
)
def test_small_variables_are_compressed_whole_when_that_is_smaller(tmp_path, file, name, whole):
    """A variable of at most 1 MiB is one sub-chunk when its plan finds that smaller than
    blocks, else it keeps the blocks; either way it is stored in no more bytes than netCDF4's
    zlib 4 + shuffle, and reads back bit-exact."""
    arr, ds, zlib_bytes = _imported_beside_zlib(tmp_path, file, name)
    var = ds[name]
    stored = ds.stats()[name]["stored_bytes"]
    assert stored <= zlib_bytes, f"{name}: {stored} bytes with {var.plan['chosen']}, netCDF4 zlib {zlib_bytes}"
    assert (tuple(var.subchunks) == arr.shape) == whole, (var.subchunks, var.plan.get("unit"))
    if arr.nbytes > 64 << 10:
        # Both ways were measured on the whole variable; the record says which won.
        assert var.plan["unit"]["stored_whole"] == whole
        assert var.plan["chosen"] in var.plan["unit"]["whole" if whole else "blocks"]
    assert_bit_equal(var[...], arr, name)
    box = tuple(slice(n // 3, n // 3 + max(1, n // 4)) for n in arr.shape)
    assert_bit_equal(var[box], arr[box], name)


def test_write_arrays_refuses_a_bound_without_auto(tmp_path):
    with pytest.raises(strata.InvalidArgumentError, match="error_bound needs codec='auto'"):
        strata.write_arrays(tmp_path / "x.strata", {"v": (("t",), np.zeros(4, "f4"))}, error_bound="abs=0.1")


def test_import_refuses_a_bound_with_an_explicit_chain(tmp_path, capsys):
    """The importer shares the writers' options: a bound with a lossless chain is an
    error, not ignored (it was ignored before)."""
    src = tmp_path / "v.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("t", 4)
        nc.createVariable("v", "f4", ("t",))[:] = np.arange(4)
    with pytest.raises(strata.InvalidArgumentError, match="error_bound needs codec='auto'"):
        strata.import_file(src, tmp_path / "a.strata", codec="zstd:3", error_bound="abs=0.1")
    assert not (tmp_path / "a.strata").exists()
    code = main(["import", "-q", "--codec", "zstd:3", "--error-bound", "abs=0.1", str(src), str(tmp_path / "b.strata")])
    assert code == 2 and "error_bound needs codec='auto'" in capsys.readouterr().err
    # codec=None is the importer's auto, with the bound.
    strata.import_file(src, tmp_path / "c.strata", codec=None, error_bound="abs=0.1")
    np.testing.assert_array_equal(strata.open(tmp_path / "c.strata")["v"][...], np.arange(4, dtype="f4"))


@needs_data
@pytest.mark.parametrize("layout", ["V-S", "M-S", "V-M-S"])
def test_small_variables_stored_whole_answer_value_queries(tmp_path, layout):
    """Under every layout level a small variable may be one sub-chunk (CESM's cell areas
    are, their repeats being what compresses them): counts, points and reduced-precision
    reads through it equal NumPy's."""
    with raw_source(DATA / "ihesp14.TS.12mon.nc") as nc:
        area = np.ascontiguousarray(nc["area"][...])
    src = _alone(tmp_path / "src.nc", "area", area, ("ncol",))
    store = tmp_path / "s.strata"
    strata.import_file(src, store, layout=layout, bins=8 if "V" in layout else None)
    ds = strata.open(store)
    assert tuple(ds["area"].subchunks) == area.shape, ds["area"].plan.get("unit")
    cut = float(np.quantile(area, 0.3))
    want = area > cut
    assert ds.query(f"area > {cut!r}", output="count") == want.sum()
    pts = ds.query(f"area > {cut!r}", output="points", variables=["area"])
    np.testing.assert_array_equal(pts["area"].to_numpy(), area[want])
    assert_bit_equal(ds["area"][1000:1100], area[1000:1100], layout)
    if "M" in layout:
        low = ds["area"].at_precision(1)[...]
        err = np.abs(low - area) / np.abs(area)
        assert err.max() <= ds["area"].at_precision(1).max_rel_error


@needs_data
@pytest.mark.parametrize(
    "file,name,moves",
    [
        # 17 levels of 96 x 192: cubes (1, 17, 24, 24) cut the rows every 24 values; in
        # cubes these two were 3.6% and 4.2% larger than netCDF4.
        ("rectilinear_grid_3D.nc", "t", True),
        ("rectilinear_grid_3D.nc", "rhumidity", True),
        # A 64 x 64 x 128 shock simulation: either shape may win; the record must say which.
        ("cth_shock_physics.nc", "Y_Velocity", None),
    ],
)
def test_variables_of_one_chunk_take_the_smaller_automatic_shape(tmp_path, file, name, moves):
    """A variable of one chunk that ``auto`` cuts into cubes is measured in blocks of its
    proportions too and stored in the smaller: no larger than netCDF4's zlib 4 + shuffle,
    smaller than forced cubes when it moved, and bit-exact."""
    arr, ds, zlib_bytes = _imported_beside_zlib(tmp_path, file, name)
    var = ds[name]
    stored = ds.stats()[name]["stored_bytes"]
    assert stored <= zlib_bytes, f"{name}: {stored} bytes with {var.plan['chosen']}, netCDF4 zlib {zlib_bytes}"
    look = var.plan["shape"]
    assert var.plan["version"] >= 4
    assert var.plan["chosen"] in (look["other"] if look["stored_other"] else look["ranked"])
    strata.import_file(tmp_path / "src.nc", tmp_path / "cube.strata", shape_rule="cube")
    cubes = strata.open(tmp_path / "cube.strata")
    assert cubes[name].plan.get("shape") is None, "an explicit rule is not second-guessed"
    if look["stored_other"]:
        assert tuple(var.subchunks) == tuple(look["shape"]) != tuple(cubes[name].subchunks)
        assert stored < cubes.stats()[name]["stored_bytes"]
    else:
        assert tuple(var.subchunks) == tuple(cubes[name].subchunks)
    if moves is not None:
        assert look["stored_other"] == moves, look
    assert_bit_equal(var[...], arr, name)
    box = tuple(slice(n // 3, n // 3 + max(1, n // 4)) for n in arr.shape)
    assert_bit_equal(var[box], arr[box], name)


@needs_data
def test_variables_in_proportional_blocks_answer_value_queries(tmp_path):
    """The shape a plan chose is the one every reader uses: the 17-level temperature, moved
    to blocks of its proportions, answers counts, points and boxes as NumPy does."""
    with raw_source(DATA / "rectilinear_grid_3D.nc") as nc:
        t, dims = np.ascontiguousarray(nc["t"][...]), nc["t"].dimensions
    src = _alone(tmp_path / "src.nc", "t", t, dims)
    strata.import_file(src, tmp_path / "s.strata")
    ds = strata.open(tmp_path / "s.strata")
    assert ds["t"].plan["shape"]["stored_other"] and tuple(ds["t"].subchunks) == (1, 5, 24, 96)
    for cut in np.quantile(t, [0.01, 0.7, 0.999]):
        want = t > cut
        assert ds.query(f"t > {float(cut)!r}", output="count") == want.sum()
        pts = ds.query(f"t > {float(cut)!r}", output="points", variables=["t"])
        np.testing.assert_array_equal(np.sort(pts["t"].to_numpy()), np.sort(t[want]))
    assert_bit_equal(ds["t"][0, 3:9, 10:50, 100:190], t[0, 3:9, 10:50, 100:190], "t")
    assert_bit_equal(ds["t"][0, :, 7, :], t[0, :, 7, :], "t")


@needs_data
@pytest.mark.parametrize(
    "file",
    # Shape looks (CTH, the 17-level grid), whole looks (WRF), record variables planned from
    # their first slab (ERSST), plain plans (MPAS).
    [
        "cth_shock_physics.nc",
        "rectilinear_grid_3D.nc",
        "wrf_katrina_ci_test_file.nc",
        "ersst_v3b_1960-2016_concat.nc",
        "MPAS.nc",
    ],
)
def test_a_preview_is_what_the_import_stores(tmp_path, file):
    """`preview_import` (and `strata analyze`) show the chain, shapes and plan record the
    import then stores, and write nothing."""
    before = sorted(tmp_path.iterdir())
    preview = {p.name: p for p in strata.preview_import(DATA / file)}
    assert sorted(tmp_path.iterdir()) == before
    strata.import_file(DATA / file, tmp_path / "s.strata")
    ds = strata.open(tmp_path / "s.strata")
    numeric = {n for n, v in ds.variables.items() if v.dtype_name not in ("string", "char") and v.size}
    assert numeric <= set(preview)
    for name in numeric:
        p, v = preview[name], ds[name]
        assert (p.chain, p.chunks, p.subchunks, p.shape) == (v.chains[-1], v.chunks, v.subchunks, v.shape), name
        assert p.plan == v.plan, name
    assert any(p.plan for p in preview.values())


def test_preview_refuses_unknown_variables(tmp_path):
    nc = big_nc(tmp_path / "a.nc", range(3))
    with pytest.raises(strata.InvalidArgumentError, match="nope"):
        strata.preview_import(nc, ["nope"])
    (temp,) = strata.preview_import(nc, ["temp"])
    assert temp.shape == (3, 60, 80) and temp.plan["chosen"] == temp.chain


def test_analyze_shows_what_the_import_stores(tmp_path, capsys):
    nc = big_nc(tmp_path / "a.nc", range(40))
    (temp,) = strata.analyze(nc, ["temp"], samples=2, min_seconds=None)
    (planned,) = strata.preview_import(nc, ["temp"])
    assert temp.stored == planned
    strata.import_file(nc, tmp_path / "a.strata")
    (stored,) = strata.analyze(tmp_path / "a.strata", ["temp"], samples=2, min_seconds=None)
    assert (stored.stored.chain, stored.stored.subchunks, stored.stored.plan) == (
        planned.chain,
        planned.subchunks,
        planned.plan,
    )
    assert main(["analyze", str(nc), "temp", "--samples", "2"]) == 0
    out = capsys.readouterr().out
    blocks = "x".join(map(str, planned.subchunks))
    assert f"import stores: {planned.chain}, blocks {blocks}" in out
    assert main(["analyze", str(tmp_path / "a.strata"), "temp", "--samples", "2"]) == 0
    assert f"stored: {planned.chain}, blocks {blocks}" in capsys.readouterr().out


def test_import_dry_run_shows_the_plans_and_writes_nothing(tmp_path, capsys):
    nc = big_nc(tmp_path / "a.nc", range(40))
    before = sorted(tmp_path.iterdir())
    assert main(["import", str(nc), "--dry-run", "--objective", "ratio"]) == 0
    assert main(["import", str(nc), str(tmp_path / "never.strata"), "--dry-run"]) == 0
    assert sorted(tmp_path.iterdir()) == before
    out = capsys.readouterr().out
    (ratio,) = strata.preview_import(nc, ["temp"], objective="ratio")
    assert f"temp (f32, 40x60x80)\n  would store: {ratio.chain}, blocks " in out
    assert "(ratio, first look on" in out and "(balanced, first look on" in out
    assert main(["import", str(nc)]) == 2, "without --dry-run a store is needed"
    assert "give the store to create" in capsys.readouterr().err


def test_analyze_still_scores_a_file_the_import_would_refuse(tmp_path, monkeypatch):
    import importlib

    # strata.analyze imports the importer's preview when it runs: patched where it lives.
    importer_module = importlib.import_module("strata.importer")

    def refuse(*args, **kwargs):
        raise strata.CompatibilityError("a reason the import gives")

    monkeypatch.setattr(importer_module, "preview_import", refuse)
    nc = big_nc(tmp_path / "a.nc", range(4))
    with pytest.warns(UserWarning, match="would not import as it is: a reason the import gives"):
        (temp,) = strata.analyze(nc, ["temp"], samples=2, min_seconds=None)
    assert temp.scores and temp.stored is None
