"""strata.Writer: a store written one time step at a time, as a simulation produces it."""

import os
import subprocess
import sys
import textwrap

import netCDF4
import numpy as np
import pytest

import strata
from conftest import DATA, needs_data

ERSST = DATA / "ersst_v3b_1960-2016_concat.nc"


def ersst():
    with netCDF4.Dataset(ERSST) as nc:
        nc.set_auto_maskandscale(False)
        return {name: nc.variables[name][:] for name in ("time", "lat", "lon", "sst")}, {
            name: {a: nc.variables[name].getncattr(a) for a in nc.variables[name].ncattrs()}
            for name in ("time", "lat", "lon", "sst")
        }


def create_like_ersst(path, values, attrs, **options):
    return strata.Writer.create(
        path,
        dims={"time": None, "lat": 89, "lon": 180},
        variables={
            name: (values[name].dtype, dims, attrs[name])
            for name, dims in [
                ("time", ("time",)),
                ("lat", ("lat",)),
                ("lon", ("lon",)),
                ("sst", ("time", "lat", "lon")),
            ]
        },
        **options,
    )


@needs_data
@pytest.mark.parametrize("layout", ["S", "V-S", "M-S"])
def test_steps_of_a_real_series_read_back_bit_exact(tmp_path, layout):
    values, attrs = ersst()
    with create_like_ersst(tmp_path / "s", values, attrs, codec="auto", layout=layout, records=684) as w:
        w.write("lat", values["lat"])
        w.write("lon", values["lon"])
        for t in range(684):
            w.append(time=values["time"][t], sst=values["sst"][t])
        assert w.record_count == 684
    ds = strata.open(tmp_path / "s")
    assert ds.version == 1 and ds.dims == {"time": 684, "lat": 89, "lon": 180}
    for name in values:
        got = ds[name][:]
        assert got.dtype == values[name].dtype and got.tobytes() == values[name].tobytes(), name
    assert ds["sst"].attrs["units"] == "degree_Celsius"
    assert ds.manifest["layout"]["order"] == layout.split("-")


@needs_data
def test_the_stream_gets_the_importers_codec_plan(tmp_path):
    values, attrs = ersst()
    strata.import_file(ERSST, tmp_path / "imported", codec="auto", objective="ratio")
    imported = strata.open(tmp_path / "imported")
    w = create_like_ersst(
        tmp_path / "s",
        values,
        attrs,
        codec="auto",
        objective="ratio",
        records=684,
        slab_records=imported.manifest["slab_records"],
    )
    w.write("lat", values["lat"])
    w.write("lon", values["lon"])
    for t0 in range(0, 684, 12):  # a year at a time
        w.append(time=values["time"][t0 : t0 + 12], sst=values["sst"][t0 : t0 + 12])
    w.commit()
    streamed = strata.open(tmp_path / "s")
    assert streamed["sst"].plan["chosen"] == imported["sst"].plan["chosen"]
    assert streamed["sst"].codecs == imported["sst"].codecs


def test_appending_to_an_existing_store_adds_a_version(tmp_path):
    w = strata.Writer.create(tmp_path / "s", dims={"t": None, "x": 4}, variables={"v": ("i4", ("t", "x"))})
    w.append(v=np.arange(8, dtype="i4").reshape(2, 4))
    assert w.commit() == 1
    with strata.Writer.append_to(tmp_path / "s") as w:
        w.append(v=[8, 9, 10, 11])
    ds = strata.open(tmp_path / "s")
    assert ds.version == 2
    np.testing.assert_array_equal(ds["v"][:], np.arange(12).reshape(3, 4))
    assert strata.open(tmp_path / "s", version=1)["v"].shape == (2, 4)


def test_clear_errors_and_nothing_committed_on_failure(tmp_path):
    dims = {"t": None, "y": 3, "x": 4}
    variables = {"a": ("f4", ("t", "y", "x")), "n": ("i2", ("t",)), "y": ("f8", "y")}
    w = strata.Writer.create(tmp_path / "s", dims=dims, variables=variables)
    with pytest.raises(strata.InvalidArgumentError, match=r"records of shape \(3, 4\)"):
        w.append(a=np.zeros((4, 3)))
    with pytest.raises(strata.InvalidArgumentError, match="would not fit"):
        w.append(n=np.array([1.5]))
    with pytest.raises(strata.InvalidArgumentError, match="no variable 'b'"):
        w.append(b=np.zeros((3, 4)))
    with pytest.raises(strata.InvalidArgumentError, match=r"Writer\.write"):
        w.append(y=np.zeros(3))
    with pytest.raises(strata.InvalidArgumentError, match="shape"):
        w.write("y", np.zeros(4))
    w.write("y", np.arange(3.0))
    w.append(a=np.ones((3, 4)), n=1)
    w.append(a=np.ones((3, 4)))
    with pytest.raises(strata.InvalidArgumentError, match="a: 2, n: 1"):
        w.commit()
    with pytest.raises(strata.InvalidArgumentError, match="already committed"):
        w.commit()
    with pytest.raises(strata.InvalidArgumentError, match="must come first"):
        strata.Writer.create(tmp_path / "t", dims={"t": None, "x": 2}, variables={"a": ("f4", ("x", "t"))})
    with pytest.raises(strata.InvalidArgumentError, match="only one"):
        strata.Writer.create(tmp_path / "t", dims={"t": None, "u": None}, variables={})
    with pytest.raises(strata.InvalidArgumentError, match="not defined"):
        strata.Writer.create(tmp_path / "t", dims={"t": None}, variables={"a": ("f4", ("t", "z"))})

    # A block that raises commits nothing: no version.
    with (
        pytest.raises(RuntimeError, match="model blew up"),
        strata.Writer.create(tmp_path / "u", dims=dims, variables=variables) as w,
    ):
        w.write("y", np.arange(3.0))
        w.append(a=np.ones((3, 4)), n=1)
        raise RuntimeError("model blew up")
    with pytest.raises(strata.NotFoundError):
        strata.open(tmp_path / "u")


CONFIGURED = textwrap.dedent(
    """
    # A simulation's output code: nothing here says how the store is laid out.
    import sys
    import numpy as np
    import strata

    rng = np.random.default_rng(7)
    field = rng.normal(10, 3, (60, 120)).astype("f4")
    with strata.Writer.create(sys.argv[1], dims={"time": None, "y": 60, "x": 120},
                              variables={"temp": ("f4", ("time", "y", "x")), "salt": ("f8", ("time", "y", "x"))}) as w:
        for t in range(40):
            w.append(temp=field + t, salt=field.astype("f8") * 2 - t)
    """
)


def run_configured(tmp_path, name, config_text):
    env = dict(os.environ)
    if config_text is None:
        env.pop("STRATA_CONFIG", None)
    else:
        (tmp_path / f"{name}.toml").write_text(config_text)
        env["STRATA_CONFIG"] = str(tmp_path / f"{name}.toml")
    result = subprocess.run(
        [sys.executable, "-c", CONFIGURED, str(tmp_path / name)], env=env, capture_output=True, text=True
    )
    return result


def test_strata_config_changes_layout_with_no_code_change(tmp_path):
    assert run_configured(tmp_path, "plain", None).returncode == 0
    config = """
        version = 1
        layout = "V-S"
        bins = 8
        binning = "equal-width"
        slab_records = 10
        chunks = { y = 30 }

        [variables.salt]
        codec = "zstd:5"
        chunks = { x = 40 }
    """
    result = run_configured(tmp_path, "configured", config)
    assert result.returncode == 0, result.stderr
    plain, configured = strata.open(tmp_path / "plain"), strata.open(tmp_path / "configured")
    assert plain.manifest["layout"]["order"] == ["S"]
    m = configured.manifest
    assert m["layout"]["order"] == ["V", "S"] and m["layout"]["bins"]["count"] == 8
    assert m["slab_records"] == 10 and len(m["slabs"]) == 4
    assert configured["temp"].chunks[1] == 30
    assert configured["salt"].chunks[1:] == (30, 40)
    assert configured["salt"].codecs == [[{"name": "zstd", "configuration": {"level": 5}}]]
    assert configured["temp"].codecs != configured["salt"].codecs
    for name in ("temp", "salt"):
        assert configured[name][:].tobytes() == plain[name][:].tobytes()
    # Value queries use the configured bins.
    assert configured.query("temp > 20", output="count") == plain.query("temp > 20", output="count")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("layuot = 'S'", "unknown field `layuot`"),
        ("layout = 'X-S'", "unknown layout level 'X'"),
        ("[variables.nope]\ncodec = 'zstd:3'", "unknown variable 'nope'"),
        ("version = 9", "version 9"),
    ],
)
def test_a_bad_config_is_refused_by_name(tmp_path, text, needle):
    result = run_configured(tmp_path, "bad", text)
    assert result.returncode != 0
    assert needle in result.stderr and ("bad.toml" in result.stderr or "unknown" in result.stderr), result.stderr
    assert not (tmp_path / "bad" / "HEAD").exists()


def test_config_argument_and_explicit_options(tmp_path):
    (tmp_path / "c.toml").write_text('layout = "M-S"\nslab_records = 3\n')
    w = strata.Writer.create(
        tmp_path / "s",
        dims={"t": None, "x": 50},
        variables={"v": ("f8", ("t", "x"))},
        config=tmp_path / "c.toml",
        slab_records=5,
    )
    for t in range(12):
        w.append(v=np.linspace(0, 1, 50) * t)
    w.commit()
    m = strata.open(tmp_path / "s").manifest
    # The program's slab_records wins; the file's layout fills what the program left unset.
    assert m["slab_records"] == 5 and m["layout"]["order"] == ["M", "S"]
    with pytest.raises(strata.InvalidArgumentError, match="configuration"):
        strata.Writer.create(tmp_path / "t", dims={"x": 2}, variables={}, config=tmp_path / "missing.toml")


MEMORY = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    import strata

    ny, nx, steps = 500, 1000, 400            # 400 steps of 2 MB = 800 MB
    field = np.sin(np.arange(ny * nx, dtype="f4")).reshape(ny, nx)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with strata.Writer.create(sys.argv[1], dims={"time": None, "y": ny, "x": nx},
                              variables={"f": ("f4", ("time", "y", "x"))}, slab_records=8) as w:
        for t in range(steps):
            w.append(f=field + np.float32(t))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ds = strata.open(sys.argv[1])
    assert ds["f"].shape == (steps, ny, nx) and ds["f"][399, 0, 1] == field[0, 1] + np.float32(399)
    print((after - before) // 1024)
    """
)


def test_streaming_memory_is_bounded_by_slabs(tmp_path):
    result = subprocess.run([sys.executable, "-c", MEMORY, str(tmp_path / "m")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    growth_mb = int(result.stdout.strip().splitlines()[-1])
    # 800 MB went through; a slab is 16 MB.
    assert growth_mb < 150, f"peak memory grew by {growth_mb} MB while streaming 800 MB"


KILLED = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import strata

    w = strata.Writer.append_to(sys.argv[1])
    t = 0
    while True:                     # appends until killed: slabs are written, never committed
        w.append(v=np.full(1000, t, dtype="f8"))
        t += 1
        if t % 50 == 0:
            print(t, flush=True)
    """
)


def test_a_writer_killed_mid_stream_leaves_the_last_version(tmp_path):
    import signal

    path = tmp_path / "s"
    w = strata.Writer.create(path, dims={"t": None, "x": 1000}, variables={"v": ("f8", ("t", "x"))}, slab_records=10)
    w.append(v=np.zeros((25, 1000)))
    assert w.commit() == 1
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(path)], stdout=subprocess.PIPE, text=True)
    for _ in range(4):  # 200 records appended: 20 slabs written and fsynced
        proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(list((path / "data").iterdir())) > 3  # the dead writer's slabs are on disk
    ds = strata.open(path)
    assert ds.version == 1 and ds["v"].shape == (25, 1000)
    assert strata._core.verify(str(path), None, True)[4] == []
    with strata.Writer.append_to(path) as w:  # the next writer goes on from version 1
        w.append(v=np.ones((5, 1000)))
    assert strata.open(path)["v"].shape == (30, 1000)


def test_append_to_rechecks_the_chain_on_new_data(tmp_path):
    rng = np.random.default_rng(3)
    smooth = np.cumsum(rng.normal(size=(80, 200, 100)), axis=2).astype("f8")
    dims, variables = {"t": None, "y": 200, "x": 100}, {"v": ("f8", ("t", "y", "x"))}
    with strata.Writer.create(tmp_path / "s", dims=dims, variables=variables, codec="raw", slab_records=40) as w:
        w.append(v=smooth[:40])
    with strata.Writer.append_to(tmp_path / "s") as w:  # as strata.append_file: the chain is checked
        w.append(v=smooth[40:])
    ds = strata.open(tmp_path / "s")
    assert ds["v"].codecs[0] == [{"name": "raw"}] and len(ds["v"].codecs) == 2
    assert ds["v"].plan["previous"] == "raw" and ds["v"].plan["gain"] >= 1.10
    assert ds["v"][:].tobytes() == smooth.tobytes()  # old slabs raw, new ones the new chain
    with strata.Writer.append_to(tmp_path / "s", recheck=False) as w:
        w.append(v=smooth[:40])
    assert len(strata.open(tmp_path / "s")["v"].codecs) == 2


@pytest.mark.parametrize("overlap", [True, False])
def test_slabs_written_on_the_writers_thread_or_the_callers(tmp_path, overlap):
    rng = np.random.default_rng(5)
    data = rng.normal(size=(57, 30, 40)).astype("f4")
    with strata.Writer.create(
        tmp_path / "s",
        dims={"t": None, "y": 30, "x": 40},
        variables={"v": ("f4", ("t", "y", "x"))},
        slab_records=8,
        overlap=overlap,
    ) as w:
        for step in data:
            w.append(v=step)
        assert w.record_count == 57
    ds = strata.open(tmp_path / "s")
    assert ds["v"][:].tobytes() == data.tobytes() and len(ds.manifest["slabs"]) == 8
