"""The end of an HDF5 (NetCDF-4) file as its superblock gives it: a file shorter than that
is truncated. netCDF4 reports one only as "HDF error"."""

from __future__ import annotations

SIGNATURE = b"\x89HDF\r\n\x1a\n"
# Enough of a file's start to hold any superblock's end-of-file address.
HEAD_BYTES = 64


def _addresses(head: bytes) -> tuple[int, int] | None:
    """Where the base address starts in a superblock at byte 0 of ``head``, and the size of
    its addresses (the end-of-file address follows the base at twice that); None when the
    superblock's version or address size is not one HDF5 writes, or ``head`` ends first."""
    if len(head) < 14:
        return None
    version = head[8]
    if version in (0, 1):
        # Versions, sizes, B-tree K values and flags, then (version 1) 4 more bytes.
        offsets, base_at = head[13], 28 if version == 1 else 24
    elif version in (2, 3):
        # Version, sizes of offsets and lengths, flags.
        offsets, base_at = head[9], 12
    else:
        return None
    return (base_at, offsets) if offsets in (2, 4, 8) else None


def end_of_file(head: bytes) -> int | None:
    """The byte an HDF5 file starting with ``head`` (its first ``HEAD_BYTES`` bytes, with its
    superblock at byte 0) ends at, as its superblock says; None when it is not such a file, or
    the superblock is cut short or leaves the end undefined."""
    found = _addresses(head) if head[:8] == SIGNATURE else None
    if found is None:
        return None
    base_at, offsets = found
    eof_at = base_at + 2 * offsets
    if len(head) < eof_at + offsets:
        return None
    base = int.from_bytes(head[base_at : base_at + offsets], "little")
    eof = int.from_bytes(head[eof_at : eof_at + offsets], "little")
    undefined = (1 << (8 * offsets)) - 1
    return None if undefined in (base, eof) else base + eof


def truncation(head: bytes, size: int) -> str | None:
    """Why an HDF5 file of ``size`` bytes starting with ``head`` (its first ``HEAD_BYTES``
    bytes, or all of it) is truncated, or None (also for other formats)."""
    if head[:8] != SIGNATURE:
        return None
    found = _addresses(head)
    # A superblock needs at most 52 bytes: a shorter head is the whole file.
    if len(head) < 14 or (found is not None and len(head) < found[0] + 3 * found[1]):
        return f"it holds {size} bytes, less than its HDF5 superblock: the file is truncated"
    end = end_of_file(head)
    if end is not None and size < end:
        return f"it holds {size} bytes but its HDF5 superblock describes {end}: the file is truncated"
    return None
