"""Attributes into the manifest's typed JSON form (docs/format.md, "Attributes"); the way
back is `strata._core`'s (a store's schema gives attribute values already decoded)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import CompatibilityError

NUMERIC_TYPES = {
    "i1": "i8",
    "u1": "u8",
    "i2": "i16",
    "u2": "u16",
    "i4": "i32",
    "u4": "u32",
    "i8": "i64",
    "u8": "u64",
    "f4": "f32",
    "f8": "f64",
}


def _floats_json(flat: np.ndarray, type_name: str) -> list:
    """Finite floats as JSON numbers; NaN (with its exact bit pattern) and infinities as text."""
    width, fdt, udt = (8, "<f4", "<u4") if type_name == "f32" else (16, "<f8", "<u8")
    floats = flat.astype(fdt)
    out: list = []
    for f, bits in zip(floats, floats.view(udt), strict=True):
        if math.isnan(f):
            out.append(f"NaN:0x{int(bits):0{width}x}")
        elif math.isinf(f):
            out.append("Infinity" if f > 0 else "-Infinity")
        else:
            out.append(float(f))
    return out


def encode(name: str, value: Any) -> dict:
    """One attribute as ``{"name", "type", "value"}``."""
    if isinstance(value, str):
        return {"name": name, "type": "string", "value": value}
    if isinstance(value, bytes):
        return {"name": name, "type": "string", "value": value.decode("utf-8", "replace")}
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return {"name": name, "type": "strings", "value": list(value)}
    arr = np.asarray(value)
    if arr.dtype.kind in "US":
        return {"name": name, "type": "strings", "value": [str(v) for v in arr.ravel()]}
    if arr.dtype.kind == "b":
        arr = arr.astype("i1")
    key = arr.dtype.newbyteorder("=").str[1:] if arr.dtype.byteorder in "<>" else arr.dtype.str[1:]
    type_name = NUMERIC_TYPES.get(key)
    if type_name is None:
        raise CompatibilityError(f"attribute '{name}' has unsupported type {arr.dtype}")
    flat = arr.ravel()
    if type_name in ("f32", "f64"):
        values = _floats_json(flat, type_name)
    else:
        values = [int(v) for v in flat]
    return {"name": name, "type": type_name, "value": values}


def encode_all(attrs: dict[str, Any]) -> list[dict]:
    return [encode(k, v) for k, v in attrs.items()]
