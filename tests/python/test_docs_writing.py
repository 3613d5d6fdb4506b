"""The examples of docs/writing.md run as written."""

import pathlib
import re

import numpy as np

import strata

DOC = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "writing.md").read_text()


def block(after_heading: str, lang: str) -> str:
    section = DOC.split(after_heading, 1)[1]
    return re.search(rf"```{lang}\n(.*?)```", section, re.S).group(1)


def test_writer_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(block("## Python: `strata.Writer`", "python"), {})
    ds = strata.open(tmp_path / "run.strata")
    assert ds["sst"].shape == (365, 90, 180) and ds.attrs["title"] == "a year of steps"
    assert ds["sst"][364, 0, 0] == np.float32(15.0 + 364 / 100)


def test_netcdf_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(block("## netCDF4 programs", "python"), {})
    ds = strata.open(tmp_path / "run.strata")
    assert ds["temp"].shape == (10, 90) and ds["temp"].attrs["units"] == "K"


def test_shape_rule_example(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = block("## Chunk shapes", "python")
    exec(code, {})
    # The shapes the example's comments promise are the ones printed.
    promised = re.findall(r"# (\(.*?\))", code)
    assert capsys.readouterr().out.split("\n")[:2] == promised
    assert strata.open(tmp_path / "auto.strata")["v"].subchunks[:2] == (1, 2)


def test_layout_file_example(tmp_path):
    (tmp_path / "layout.toml").write_text(block("## Layout by configuration", "toml"))
    w = strata.Writer.create(
        tmp_path / "s",
        dims={"time": None, "lat": 90, "lon": 180},
        variables={v: ("f4", ("time", "lat", "lon")) for v in ("temp", "salt", "ice")},
        config=tmp_path / "layout.toml",
    )
    for _ in range(3):
        w.append(temp=np.zeros((90, 180)), salt=np.ones((90, 180)), ice=np.full((90, 180), 0.5))
    w.commit()
    ds = strata.open(tmp_path / "s")
    assert ds.manifest["layout"]["order"] == ["V", "S"] and ds.manifest["slab_records"] == 24
    assert ds["salt"].chunks[1:] == (45, 45) and ds["temp"].chunks[1:] == (45, 90)


def test_threads_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(block("## Parallel writers", "python"), {})
    ds = strata.open(tmp_path / "run.strata")
    assert ds["sst"].shape == (365, 90, 180) and np.all(ds["sst"][:] == np.float32(15.0))
    assert ds["lat"][:].tolist() == np.linspace(-89, 89, 90, dtype="f4").tolist()
    assert ds["time"][:].tolist() == list(range(365))
