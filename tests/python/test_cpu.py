"""The CPU check that runs before the extension loads (python/strata/_cpu.py)."""

import platform

from strata import _cpu


def test_this_machine_passes_the_check_it_was_built_for():
    # The test suite runs on the machine that built the extension.
    assert _cpu.missing_features(_cpu.cpu_flags(), platform.machine()) == []


def test_cpuinfo_flags_are_read_from_the_first_processor(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 bmi1\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert _cpu.cpu_flags(str(info)) == {"fpu", "sse2", "avx", "avx2", "bmi1"}
    assert _cpu.cpu_flags(str(tmp_path / "absent")) is None


def test_an_older_x86_cpu_is_told_what_it_lacks():
    v3 = set(_cpu.X86_64_V3)
    assert _cpu.missing_features(v3, "x86_64") == []
    assert _cpu.missing_features(v3 - {"avx2", "bmi2"}, "x86_64") == ["avx2", "bmi2"]
    # Off x86-64, or with no flags to read, there is nothing to refuse.
    assert _cpu.missing_features(set(), "aarch64") == []
    assert _cpu.missing_features(None, "x86_64") == []


def test_the_refusal_names_the_rebuild(monkeypatch):
    monkeypatch.delenv(_cpu.SKIP, raising=False)
    monkeypatch.setattr(_cpu, "cpu_flags", lambda: {"sse2"})
    monkeypatch.setattr(_cpu.platform, "machine", lambda: "x86_64")
    try:
        _cpu.check()
    except ImportError as e:
        assert "x86-64-v3" in str(e) and "RUSTFLAGS" in str(e) and _cpu.SKIP in str(e)
    else:
        raise AssertionError("an x86-64 CPU without AVX2 was not refused")
    monkeypatch.setenv(_cpu.SKIP, "1")
    _cpu.check()
