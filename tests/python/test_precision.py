"""Layout level M: floats split into byte groups; reads at reduced precision fetch fewer
bytes and hold the documented worst relative error on every element."""

import numpy as np
import pytest

import strata
from conftest import DATA, assert_bit_equal, needs_data, raw_source
from strata.cli import main


def _check_level(got: np.ndarray, want: np.ndarray, bound: float, what: str) -> None:
    want = np.asarray(want)
    assert got.dtype == want.dtype.newbyteorder("=") and got.shape == want.shape, what
    w = want.astype("f8")
    g = got.astype("f8")
    special = ~np.isfinite(w) | (w == 0)
    # Zeros and infinities come back exactly, NaN stays NaN.
    assert np.array_equal(np.isnan(g), np.isnan(w)), what
    inf_or_zero = special & ~np.isnan(w)
    bits = np.dtype(f"u{want.dtype.itemsize}")
    assert np.array_equal(got[inf_or_zero].view(bits), want.astype(got.dtype)[inf_or_zero].view(bits)), what
    tiny = np.finfo(want.dtype).tiny
    finite = ~special
    err = np.abs(g[finite] - w[finite])
    # Relative for normal numbers; for subnormals 2^-m times the smallest normal.
    limit = np.where(np.abs(w[finite]) >= tiny, bound * np.abs(w[finite]), 2 * bound * tiny)
    assert np.all(err <= limit), f"{what}: {err.max()}"


def _tricky(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 6, shape)).astype(dtype)
    flat = a.reshape(-1)
    flat[::97] = np.nan
    flat[5::101] = 0.0
    flat[7::103] = -0.0
    flat[11::107] = np.inf
    flat[13::109] = -np.inf
    flat[17::113] = np.finfo(dtype).tiny / 3  # subnormal
    return a


@pytest.mark.parametrize("layout", ["S-M", "M-S"])
@pytest.mark.parametrize("dtype", ["f4", "f8"])
def test_every_level_holds_its_bound_and_full_is_exact(tmp_path, layout, dtype):
    a = _tricky(dtype, (12, 40, 50))
    store = tmp_path / "s.strata"
    ints = np.arange(12 * 40 * 50, dtype="i4").reshape(12, 40, 50)
    strata.write_arrays(
        store, {"x": (("t", "y", "z"), a), "n": (("t", "y", "z"), ints)}, record_dim="t", layout=layout, slab_records=5
    )
    ds = strata.open(store, cache_bytes=0)
    x = ds["x"]
    levels = x.precision_levels
    assert [k for k, _, _ in levels] == list(range(1, len(levels) + 1))
    assert len(levels) == (3 if dtype == "f4" else 7) and levels[-1][2] == 0.0
    assert_bit_equal(x[...], a, "full precision")
    assert_bit_equal(ds["n"].at_precision(1)[...], ints, "integers are not split")
    previous = None
    for k, _kept, bound in levels:
        view = x.at_precision(k)
        before = ds.read_stats()["bytes_read"]
        got = view[2:11, 3:37, ::3]
        read = ds.read_stats()["bytes_read"] - before
        _check_level(got, a[2:11, 3:37, ::3], bound, f"level {k}")
        if previous is not None:
            assert read > previous, "each level reads more bytes than the one before"
        previous = read
    # By bound: the fewest groups that hold it.
    v = x.at_precision(max_rel_error=1e-4)
    assert v.max_rel_error <= 1e-4 and (v.level is None or levels[v.level - 2][2] > 1e-4)
    _check_level(v[...], a, 1e-4, "max_rel_error=1e-4")


@needs_data
def test_fill_values_read_exact_at_every_level(tmp_path):
    # The ocean grid's land is _FillValue 1e20: kept to two bytes it read as 9.98e19, which
    # no reader masks. Every level gives the fill back exact, and the ocean within its bound.
    name = "tos_ocean_bipolar_grid.nc"
    strata.import_file(DATA / name, tmp_path / "m.strata", layout="M-S")
    with raw_source(DATA / name) as nc:
        full = nc["tos"][...]
    land = full == np.float32(1e20)
    assert land.any()
    var = strata.open(tmp_path / "m.strata")["tos"]
    for level, _, bound in var.precision_levels:
        got = var.at_precision(level)[...]
        assert (got[land] == np.float32(1e20)).all(), level
        assert (np.abs(got[~land] - full[~land]) <= bound * np.abs(full[~land])).all(), level
        dense = strata.open(tmp_path / "m.strata").query("tos > 300", precision=level, output="dense")
        assert np.isnan(dense[land]).all(), level


def test_precision_reads_fetch_a_fraction_of_the_bytes(tmp_path):
    rng = np.random.default_rng(1)
    a = np.cumsum(rng.standard_normal((20, 64, 64)), axis=2)  # f64, noisy low bytes
    full, split = tmp_path / "full.strata", tmp_path / "split.strata"
    strata.write_arrays(full, {"x": (("t", "y", "z"), a)}, record_dim="t", codec="zstd:3")
    strata.write_arrays(split, {"x": (("t", "y", "z"), a)}, record_dim="t", layout="M-S")
    ds = strata.open(split, cache_bytes=0)
    ds["x"].at_precision(2)[...]
    three_of_eight = ds.read_stats()["bytes_read"]
    ds2 = strata.open(split, cache_bytes=0)
    ds2["x"][...]
    assert three_of_eight < 0.6 * ds2.read_stats()["bytes_read"]


def test_layout_errors_are_clear(tmp_path):
    a = np.zeros((4, 5), "f4")
    for layout, msg in [("S-S", "twice"), ("M", "must include S"), ("X", "unknown")]:
        with pytest.raises(strata.InvalidArgumentError, match=msg):
            strata.write_arrays(tmp_path / f"{layout}.strata", {"x": (("t", "y"), a)}, layout=layout)
    with pytest.raises(strata.InvalidArgumentError, match="adding up to 4"):
        strata.write_arrays(tmp_path / "g.strata", {"x": (("t", "y"), a)}, layout="S-M", byte_groups={"f32": [2, 1]})
    store = tmp_path / "ok.strata"
    strata.write_arrays(store, {"x": (("t", "y"), a)}, layout="S-M")
    x = strata.open(store)["x"]
    for bad in (0, -1, 1.5):
        with pytest.raises(strata.InvalidArgumentError):
            x.at_precision(bad)
    with pytest.raises(strata.InvalidArgumentError, match="exactly one"):
        x.at_precision(1, max_rel_error=0.1)


@needs_data
def test_real_data_at_every_level_and_on_the_cli(tmp_path, capsys):
    name = "ersst_v3b_1960-2016_concat.nc"
    store = tmp_path / "e.strata"
    strata.import_file(DATA / name, store, layout="M-S")
    ds = strata.open(store)
    with raw_source(DATA / name) as src:
        want = np.asarray(src["sst"][...])
    assert_bit_equal(ds["sst"][...], want, "full")
    for k, _, bound in ds["sst"].precision_levels:
        _check_level(ds["sst"].at_precision(k)[...], want, bound, f"sst level {k}")
    assert main(["info", str(store)]) == 0
    assert "layout M-S" in capsys.readouterr().out
    out = tmp_path / "q.npy"
    assert main(["query", str(store), "sst", "--isel", "time=0:2", "--precision", "1", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["query", str(store), "sst", "--isel", "time=0:2", "--max-rel-error", "1e-3", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "precision level 2" in err
    _check_level(np.load(out), want[0:2], 2.0**-16, "cli")
