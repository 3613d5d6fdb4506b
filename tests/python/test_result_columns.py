"""A large points result's columns are the engine's buffers, read in place by NumPy; once
no array reads one, it serves the next result. A result never shares memory with one still
alive, and every result equals NumPy's."""

import gc

import numpy as np

import strata


def _address(df, column):
    return df[column].to_numpy().__array_interface__["data"][0]


def test_columns_are_reused_only_once_free_and_answers_stay_exact(tmp_path):
    rng = np.random.default_rng(3)
    field = rng.random((60, 300, 400), dtype=np.float32)  # 7.2M elements
    store = tmp_path / "f.strata"
    strata.write_arrays(store, {"v": (("t", "y", "x"), field)})
    ds = strata.open(store, cache_bytes=0)

    def check(df, mask):
        t, y, x = np.nonzero(mask)
        assert len(df) == len(t)
        order = np.lexsort((df["x"], df["y"], df["t"]))
        assert np.array_equal(df["t"].to_numpy()[order], t)
        assert np.array_equal(df["y"].to_numpy()[order], y)
        assert np.array_equal(df["x"].to_numpy()[order], x)
        assert np.array_equal(df["v"].to_numpy()[order], field[mask])

    high = ds.query("v > 0.3", output="points")  # 5M rows: index columns of 40 MB
    check(high, field > 0.3)
    low = ds.query("v <= 0.3", output="points")
    check(low, field <= 0.3)
    for a in high.columns:
        for b in low.columns:
            assert not np.shares_memory(high[a].to_numpy(), low[b].to_numpy()), (a, b)
    # Columns of a result nobody reads any more serve the next one, written afresh.
    was = _address(high, "t")
    del high
    gc.collect()
    again = ds.query("v > 0.3", output="points")
    check(again, field > 0.3)
    assert was in {_address(again, c) for c in again.columns}
    # Arrays taken out of a frame keep their column alive after the frame is gone.
    kept = again["y"].to_numpy()
    want = kept.copy()
    del again
    gc.collect()
    other = ds.query("v > 0.2", output="points")
    check(other, field > 0.2)
    assert np.array_equal(kept, want)
    check(low, field <= 0.3)


def test_large_results_with_coordinates_equal_numpy(tmp_path):
    """Results of 32 MiB or more are written around the cache, coordinates of every width
    and unaligned value pieces included (engine: strata_core::nontemporal)."""
    rng = np.random.default_rng(5)
    field = rng.random((40, 250, 402), dtype=np.float32)
    t = np.arange(40, dtype=np.float64) * 0.25
    y = np.linspace(-60, 60, 250, dtype=np.float32)
    x = np.arange(402, dtype=np.int16) - 201
    store = tmp_path / "c.strata"
    strata.write_arrays(
        store,
        {"t": (("t",), t), "y": (("y",), y), "x": (("x",), x), "v": (("t", "y", "x"), field)},
    )
    ds = strata.open(store, cache_bytes=0)
    # Cuts a float32 holds exactly (NumPy compares in float32, the engine in float64).
    for cut in (0.0625, 0.5, 0.96875):  # 3.8M, 2M and 126k rows: above and below 32 MiB
        df = ds.query(f"v > {cut}", output="points")
        ti, yi, xi = np.nonzero(field > cut)
        order = np.lexsort((df["x"], df["y"], df["t"]))
        assert np.array_equal(df["t"].to_numpy()[order], t[ti])
        assert np.array_equal(df["y"].to_numpy()[order], y[yi])
        assert np.array_equal(df["x"].to_numpy()[order], x[xi])
        assert np.array_equal(df["v"].to_numpy()[order], field[field > cut])


def test_result_frames_equal_pandas_own_and_hold_the_columns_themselves():
    import pandas as pd
    import pandas.testing as pdt

    from strata._frames import frame

    n = 257
    rng = np.random.default_rng(5)
    plain = {
        "i1": rng.integers(-100, 100, n).astype(np.int8),
        "u2": rng.integers(0, 60000, n).astype(np.uint16),
        "i8": rng.integers(-(2**40), 2**40, n),
        "f4": rng.random(n, dtype=np.float32),
        "f8": np.where(rng.random(n) < 0.1, np.nan, rng.random(n)),
        "b": rng.random(n) < 0.5,
        "t_ns": np.arange(n).astype("datetime64[ns]"),
        "t_s": np.arange(n).astype("datetime64[s]"),
        "d_us": np.arange(n).astype("timedelta64[us]"),
    }
    got = frame(plain)
    pdt.assert_frame_equal(got, pd.DataFrame(plain, copy=False))
    for name, a in plain.items():
        assert np.shares_memory(got[name].to_numpy(), a), name
    # Columns pandas converts go through its own constructor: same frame as before.
    for odd in (
        np.array(["a", "b"] * (n // 2) + ["c"], dtype=object),
        rng.random(n).astype(np.float16),
        rng.random(n).astype(">f4"),
        np.arange(n).astype("datetime64[D]"),
        rng.random((n, 2))[:, 0],  # a strided view: kept as it is
    ):
        cols = {"x": plain["f4"], "odd": odd}
        pdt.assert_frame_equal(frame(cols), pd.DataFrame(cols, copy=False))
    # No rows, no columns.
    pdt.assert_frame_equal(frame({"v": np.zeros(0, np.float32)}), pd.DataFrame({"v": np.zeros(0, np.float32)}))
    pdt.assert_frame_equal(frame({}), pd.DataFrame({}))
