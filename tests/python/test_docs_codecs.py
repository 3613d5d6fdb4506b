"""The examples of docs/codecs.md that make their own data run as written and print what
their comments say."""

import pathlib
import re

import pytest

DOC = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "codecs.md").read_text()
# The blocks that write a store of their own (the first analyzes a file of ../shared/data).
BLOCKS = [b for b in re.findall(r"```python\n(.*?)```", DOC, re.S) if "write_arrays" in b]


def test_the_examples_are_found():
    assert len(BLOCKS) >= 3, "the whole-variable, shape and plan examples"


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_codec_example_prints_what_it_promises(code, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(code, {})
    printed = capsys.readouterr().out.splitlines()
    promised = re.findall(r"^print\(.*?\)\s*#\s*(.*)$", code, re.M)
    assert len(printed) == len(promised), (printed, promised)
    for line, comment in zip(printed, promised, strict=True):
        # The value leads the comment, or ends it after an explanation.
        assert comment.startswith(line) or comment.endswith(line), f"printed {line!r}, the comment says {comment!r}"
