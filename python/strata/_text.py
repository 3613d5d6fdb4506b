"""Numbers as people read them, the same in every command and message."""

from __future__ import annotations


def human_bytes(n: float) -> str:
    """``3.7 MiB``: binary units, one decimal."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def human_rate(bits_per_s: float) -> str:
    """``668 Mb/s``: a link's speed in decimal bits per second, three digits."""
    for unit, f in (("Tb/s", 1e12), ("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if bits_per_s >= f:
            return f"{bits_per_s / f:.3g} {unit}"
    return f"{bits_per_s:.3g} b/s"


def human_seconds(s: float) -> str:
    """``0.27 ms``, ``25 ms``, ``1.5 s``, ``1,234 s``."""
    if s < 0.01:
        return f"{s * 1e3:.2f} ms"
    if s < 1:
        return f"{s * 1e3:.0f} ms"
    return f"{s:.1f} s" if s < 100 else f"{s:,.0f} s"
