"""The automatic shape rules: `auto` (the default), `cube`, `proportional` and `slices`, chosen
by argument, by the command line or by a layout file; either way the store reads back
bit-exactly."""

import numpy as np
import pytest

import strata
from conftest import DATA, assert_bit_equal, needs_data, raw_source
from strata.cli import main
from strata.errors import InvalidArgumentError

GRID = "rectilinear_grid_3D.nc"  # (time 1, lev 17, lat 96, lon 192) float32 fields


def _subchunks(store, name):
    return tuple(strata.open(store)[name].subchunks)


@needs_data
def test_proportional_cuts_short_axes_and_reads_back_bit_exactly(tmp_path):
    cube, prop = tmp_path / "cube.strata", tmp_path / "prop.strata"
    strata.import_file(DATA / GRID, cube, shape_rule="cube")
    strata.import_file(DATA / GRID, prop, shape_rule="proportional")
    # The cube rule never cuts the 17 levels (lat and lon are cut to 24 first); the
    # proportional rule cuts every axis about alike.
    assert _subchunks(cube, "t") == (1, 17, 24, 24)
    sub = _subchunks(prop, "t")
    assert sub[1] < 17 and sub[3] > 24
    assert np.prod(sub) * 4 <= 64 << 10
    src = raw_source(DATA / GRID)
    try:
        ds = strata.open(prop)
        rng = np.random.default_rng(7)
        for name in ("t", "rhumidity", "var3"):
            want = src.variables[name][...]
            assert_bit_equal(ds[name].values, want, name)
            for _ in range(20):
                box = tuple(
                    slice(a, a + int(rng.integers(1, n - a + 1)))
                    for a, n in ((int(rng.integers(0, n)), n) for n in want.shape)
                )
                assert_bit_equal(ds[name][box], np.asarray(want)[box], f"{name}{box}")
    finally:
        src.close()


@needs_data
def test_named_lengths_replace_the_rules_own(tmp_path):
    ruled, named = tmp_path / "ruled.strata", tmp_path / "named.strata"
    strata.import_file(DATA / GRID, ruled, shape_rule="proportional")
    strata.import_file(DATA / GRID, named, shape_rule="proportional", subchunks={"lev": 17})
    want = list(_subchunks(ruled, "t"))
    want[1] = 17
    assert _subchunks(named, "t") == tuple(want)


def test_write_arrays_and_a_layout_file_take_the_rule(tmp_path):
    arr = np.arange(3 * 12 * 251 * 401, dtype=np.int16).reshape(3, 12, 251, 401)
    dims = ("time", "depth", "y", "x")
    by_arg, by_file = tmp_path / "arg.strata", tmp_path / "file.strata"
    strata.write_arrays(by_arg, {"v": (dims, arr)}, shape_rule="proportional")
    config = tmp_path / "layout.toml"
    config.write_text('version = 1\nshape_rule = "proportional"\n')
    strata.write_arrays(by_file, {"v": (dims, arr)}, config=config)
    plain, cube = tmp_path / "plain.strata", tmp_path / "cube.strata"
    strata.write_arrays(plain, {"v": (dims, arr)})
    # What the program passes wins over the file.
    strata.write_arrays(cube, {"v": (dims, arr)}, config=config, shape_rule="cube")
    assert _subchunks(by_arg, "v") == _subchunks(by_file, "v") != _subchunks(cube, "v")
    assert _subchunks(cube, "v")[:2] == (3, 12)
    assert _subchunks(by_arg, "v")[:2] < (3, 12)
    # The default cuts the 3 times and 12 depths a cube would hold whole, as proportional does.
    assert _subchunks(plain, "v") == _subchunks(by_arg, "v")
    for store in (by_arg, by_file, plain, cube):
        assert_bit_equal(strata.open(store)["v"].values, arr)


def test_the_default_keeps_cubes_on_long_series(tmp_path):
    # ERSST's shape: no axis is short beside a cube's edge, so maps keep cube-shaped blocks.
    arr = np.zeros((684, 89, 180), dtype="f4")
    dims = ("time", "lat", "lon")
    plain, cube = tmp_path / "plain.strata", tmp_path / "cube.strata"
    strata.write_arrays(plain, {"v": (dims, arr)}, codec="zstd:1")
    strata.write_arrays(cube, {"v": (dims, arr)}, codec="zstd:1", shape_rule="cube")
    assert _subchunks(plain, "v") == _subchunks(cube, "v") == (22, 23, 23)
    assert strata.open(plain)["v"].chunks == strata.open(cube)["v"].chunks


def test_slices_serve_maps(tmp_path):
    arr = np.arange(3 * 12 * 251 * 401, dtype=np.int16).reshape(3, 12, 251, 401)
    store = tmp_path / "s.strata"
    strata.write_arrays(store, {"v": (("time", "depth", "y", "x"), arr)}, shape_rule="slices")
    ds = strata.open(store, cache_bytes=0)
    assert _subchunks(store, "v")[:2] == (1, 1)
    before = ds.read_stats()
    assert_bit_equal(ds["v"][1, 5], arr[1, 5])
    after = ds.read_stats()
    # A map decodes only the sub-chunks of its own time and depth: those of one plane.
    plane = -(-251 // _subchunks(store, "v")[2]) * -(-401 // _subchunks(store, "v")[3])
    assert after["segments_decoded"] - before["segments_decoded"] == plane


def test_an_unknown_rule_is_refused_and_writes_nothing(tmp_path):
    arr = np.zeros((4, 4), dtype="f4")
    with pytest.raises(InvalidArgumentError, match="expected one of `auto`, `cube`, `proportional`, `slices`"):
        strata.write_arrays(tmp_path / "a.strata", {"v": (("y", "x"), arr)}, shape_rule="cubic")
    assert not (tmp_path / "a.strata").exists()
    config = tmp_path / "layout.toml"
    config.write_text('shape_rule = "cubic"\n')
    with pytest.raises(InvalidArgumentError, match="unknown variant `cubic`"):
        strata.write_arrays(tmp_path / "b.strata", {"v": (("y", "x"), arr)}, config=config)


@needs_data
def test_the_command_line_takes_the_rule(tmp_path, capsys):
    store = tmp_path / "s.strata"
    assert main(["import", "-q", "--shape-rule", "proportional", str(DATA / GRID), str(store)]) == 0
    assert _subchunks(store, "t")[1] < 17
    assert main(["import", "--shape-rule", "cubic", str(DATA / GRID), str(tmp_path / "x.strata")]) == 2
    err = capsys.readouterr().err
    # The engine's list of rules, and no place in the options' internal JSON.
    assert "unknown variant `cubic`, expected one of `auto`, `cube`, `proportional`, `slices`" in err
    assert "at line" not in err
    assert not (tmp_path / "x.strata").exists()


def test_parallel_writers_pass_the_rule_on():
    # The Dask and MPI writers build their options from keyword arguments.
    from strata.writer import writer_options_of

    assert writer_options_of(shape_rule="slices", chunks="x=4")["shape_rule"] == "slices"
    assert writer_options_of()["shape_rule"] is None


def test_small_variables_are_one_subchunk_unless_sizes_are_given(tmp_path):
    """A variable of at most 1 MiB is compressed whole (one sub-chunk) unless the user gave
    sub-chunk lengths or a target size; larger variables, and streams whose length is not
    known, are cut as before."""
    rng = np.random.default_rng(3)
    small = np.cumsum(rng.normal(size=(40, 60, 50)), axis=2).astype("f4")  # 469 KiB
    large = np.cumsum(rng.normal(size=(100, 100, 50)), axis=2).astype("f4")  # 1.9 MiB
    dims = ("t", "y", "x")
    stores = {k: tmp_path / f"{k}.strata" for k in ("plain", "named", "sized", "large", "speed")}
    strata.write_arrays(stores["plain"], {"v": (dims, small)})
    strata.write_arrays(stores["named"], {"v": (dims, small)}, subchunks={"y": 20})
    config = tmp_path / "layout.toml"
    config.write_text("version = 1\nsubchunk_bytes = 65536\n")
    strata.write_arrays(stores["sized"], {"v": (dims, small)}, config=config)
    strata.write_arrays(stores["large"], {"v": (dims, large)})
    assert _subchunks(stores["plain"], "v") == small.shape
    assert _subchunks(stores["named"], "v")[1] == 20 and _subchunks(stores["named"], "v") != small.shape
    assert np.prod(_subchunks(stores["sized"], "v")) * 4 <= 65536
    assert np.prod(_subchunks(stores["large"], "v")) * 4 <= 65536
    # The speed objective measures no second look: blocks, which read faster.
    strata.write_arrays(stores["speed"], {"v": (dims, small)}, codec="auto", objective="speed")
    assert _subchunks(stores["speed"], "v") == _subchunks(stores["sized"], "v")
    for key, arr in (("plain", small), ("named", small), ("sized", small), ("large", large), ("speed", small)):
        var = strata.open(stores[key])["v"]
        assert_bit_equal(var.values, arr, key)
        assert_bit_equal(var[3:17, 11:12, 5:45], arr[3:17, 11:12, 5:45], key)
    # A stream of unknown length: its records are not held whole.
    stream_dims = {"t": None, "y": 60, "x": 50}
    with strata.Writer.create(tmp_path / "stream", dims=stream_dims, variables={"v": ("f4", dims)}) as w:
        for step in small:
            w.append(v=step)
    assert np.prod(_subchunks(tmp_path / "stream", "v")) * 4 <= 65536
    assert_bit_equal(strata.open(tmp_path / "stream")["v"].values, small)
