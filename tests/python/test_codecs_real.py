"""Codec chains on the real data: lossless chains bit-exact, lossy ones within their bound."""

import numpy as np
import pytest

import strata
from conftest import DATA, REAL_FILES, assert_bit_equal, needs_data, raw_source

LOSSLESS = ["xor:0+shuffle+lz4", "delta+pco", "lz4"]


@needs_data
@pytest.mark.parametrize("chain", LOSSLESS)
@pytest.mark.parametrize("name", REAL_FILES)
def test_lossless_chain_round_trips_every_variable(tmp_path, name, chain):
    store = tmp_path / "s.strata"
    strata.import_file(DATA / name, store, codec=chain)
    ds = strata.open(store)
    assert "+".join(c["name"] for c in ds[max(ds.data_vars, key=lambda n: ds[n].size)].codecs[0]) == "+".join(
        part.split(":")[0] for part in chain.split("+")
    )
    with raw_source(DATA / name) as src:
        for vname, sv in src.variables.items():
            if sv.dtype is not str:
                assert_bit_equal(ds[vname].values, sv[...], f"{name}:{vname} with {chain}")


@needs_data
@pytest.mark.parametrize("name", [n for n in REAL_FILES if not n.startswith(("Nor", "vmec"))])
def test_bitround_holds_its_bound_on_every_float(tmp_path, name):
    keep = 10
    store = tmp_path / "s.strata"
    strata.import_file(DATA / name, store, codec=f"bitround:{keep}+shuffle+zstd:3")
    ds = strata.open(store)
    with raw_source(DATA / name) as src:
        for vname, sv in src.variables.items():
            want = np.asarray(sv[...])
            got = ds[vname].values
            if want.dtype.kind != "f":
                assert_bit_equal(got, want, vname)  # integers are untouched
                continue
            w = want.astype("f8")
            finite = np.isfinite(w)
            assert np.array_equal(np.isnan(got), np.isnan(want)), vname
            tiny = np.finfo(want.dtype).tiny
            err = np.abs(got.astype("f8")[finite] - w[finite])
            assert np.all(err <= 2.0 ** -(keep + 1) * np.maximum(np.abs(w[finite]), tiny)), vname


def test_lossy_codec_needs_an_explicit_bound(tmp_path):
    from conftest import make_nc

    nc = make_nc(tmp_path / "s.nc")
    with pytest.raises(strata.InvalidArgumentError, match="explicit keepbits"):
        strata.import_file(nc, tmp_path / "s.strata", codec="bitround+zstd")


@needs_data
def test_analyze_scores_candidates_and_picks_per_objective(imported):
    name = "ersst_v3b_1960-2016_concat.nc"
    for source in (DATA / name, imported(name)):  # a file, and a store
        (sst,) = strata.analyze(source, ["sst"], samples=4, min_seconds=0.0)
        assert sst.dtype == "f32" and sst.sample_bytes > 100_000
        chains = {s.chain: s for s in sst.scores}
        assert {"shuffle+zstd:3", "pco:8", "lz4", "xor:0+shuffle+zstd:3"} <= set(chains)
        # The best ratio, or a chain with fewer stages within 0.5% of it (a tie).
        best_ratio = max(s.ratio for s in chains.values())
        tied = [c for c, s in chains.items() if s.ratio >= best_ratio * (1 - 0.005)]
        stages = min(c.count("+") for c in tied)
        picked = sst.choice["ratio"]
        assert picked in tied and picked.count("+") == stages
        assert chains[picked].ratio == max(chains[c].ratio for c in tied if c.count("+") == stages)
        assert set(sst.choice) == {"ratio", "speed", "balanced"}
        assert all(s.ratio > 1 and s.decode_mb_s > 0 for s in sst.scores)
        # Timed (min_seconds given): measured speeds, and each objective's value.
        assert all(s.measured_decode_mb_s > 0 and s.value["ratio"] == s.ratio for s in sst.scores)
        assert all(s.lossless for s in sst.scores)
    with pytest.raises(strata.InvalidArgumentError, match="nope"):
        strata.analyze(DATA / name, ["nope"])


def test_analyze_cli(tmp_path, capsys):
    from conftest import make_nc
    from strata.cli import main

    nc = make_nc(tmp_path / "a.nc")
    assert main(["analyze", str(nc), "temp", "--samples", "2"]) == 0
    out = capsys.readouterr().out
    assert "temp (f32)" in out and "shuffle+zstd:3" in out and "ratio" in out
    # No sample is no analysis: refused, not an overflow inside the engine's binding.
    for bad in ("0", "-4"):
        assert main(["analyze", str(nc), "temp", "--samples", bad]) == 2
        assert f"samples must be at least 1 (got {bad})" in capsys.readouterr().err


def _assert_within(got: np.ndarray, want: np.ndarray, limit, what: str) -> None:
    """Finite elements within ``limit``, the others bit for bit."""
    got, want = np.asarray(got).reshape(-1), np.asarray(want).reshape(-1)
    assert got.dtype == want.dtype.newbyteorder("="), what
    want = want.astype(got.dtype)
    w = want.astype("f8")
    finite = np.isfinite(w)
    bits = np.dtype(f"u{want.dtype.itemsize}")
    assert np.array_equal(got.view(bits)[~finite], want.view(bits)[~finite]), f"{what}: non-finite values changed"
    err = np.abs(got.astype("f8")[finite] - w[finite])
    assert np.all(err <= limit), f"{what}: max error {err.max()} above {limit}"


@needs_data
@pytest.mark.parametrize("chain", ["sz:abs=0.01", "sz:rel=1e-4", "zfp:abs=0.01", "zfp:rel=1e-4"])
@pytest.mark.parametrize("name", REAL_FILES)
def test_error_bounded_codecs_hold_their_bound_on_every_float(tmp_path, name, chain):
    store = tmp_path / "s.strata"
    strata.import_file(DATA / name, store, codec=chain)
    ds = strata.open(store)
    kind, value = chain.split(":")[1].split("=")
    with raw_source(DATA / name) as src:
        for vname, sv in src.variables.items():
            if sv.dtype is str:
                continue
            want = np.asarray(sv[...])
            got = ds[vname].values
            if want.dtype.kind != "f":
                assert_bit_equal(got, want, vname)  # integers are kept exactly
                continue
            finite = want[np.isfinite(want)].astype("f8")
            # rel: each segment's range is at most the variable's range.
            span = float(finite.max() - finite.min()) if finite.size else 0.0
            limit = float(value) if kind == "abs" else float(value) * span
            _assert_within(got, want, limit, f"{name}:{vname} with {chain}")


def test_error_bound_lets_auto_pick_a_lossy_codec(tmp_path):
    from conftest import make_nc

    nc = make_nc(tmp_path / "s.nc", times=range(40), nlat=90, nlon=180)
    store = tmp_path / "s.strata"
    strata.import_file(nc, store, objective="ratio", error_bound="abs=0.05")
    ds = strata.open(store)
    plan = ds["temp"].plan
    assert plan["error_bound"] == "abs=0.05"
    assert {"sz:abs=0.05", "zfp:abs=0.05"} <= {s["chain"] for s in plan["scores"]}
    assert plan["chosen"].startswith(("sz", "zfp")), plan["chosen"]
    with raw_source(nc) as src:
        _assert_within(ds["temp"].values, np.asarray(src["temp"][...]), 0.05, "temp")
        assert_bit_equal(ds["time"].values, src["time"][...], "time")  # too small to plan: lossless
    for bad in ("abs=0", "rel=-1", "abs", "tol=0.1"):
        with pytest.raises(strata.InvalidArgumentError, match="error bound"):
            strata.import_file(nc, tmp_path / f"bad{bad}.strata", error_bound=bad)
