"""Byte sizes as the tools print them."""

from __future__ import annotations

_SCALES = (("G", 2**30), ("M", 2**20), ("K", 2**10))


def format_size(size: int, *, long: bool = False) -> str:
    """A size in the largest power-of-1024 unit that divides it: ``"64M"``, else bytes:
    ``"1000"``; with ``long``, as the docs write it: ``"64 MB"``, ``"1000 B"``."""
    for unit, scale in _SCALES:
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}B" if long else f"{size // scale}{unit}"
    return f"{size} B" if long else str(size)
