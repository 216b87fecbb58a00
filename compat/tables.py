"""Read the mapping tables shipped in ``compat.mapping_tables``.

Every fact about ReduceOps, dtypes, backends and API differences lives in those TOML files; this
module only loads them (once) and answers look-ups, naming the file and key when one is missing.
"""

from __future__ import annotations

import sys
from functools import cache
from importlib.resources import files
from typing import Any

from compat.errors import TableError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

Table = dict[str, Any]


@cache
def load(name: str) -> Table:
    """Return the parsed table ``mapping_tables/<name>.toml``."""
    resource = files("compat.mapping_tables").joinpath(f"{name}.toml")
    try:
        text = resource.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TableError(
            f"mapping table {name}.toml is missing from compat.mapping_tables"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TableError(f"mapping table {name}.toml is not valid TOML: {exc}") from None


def lookup(name: str, *keys: str) -> Any:
    """Return ``table[keys[0]][keys[1]]...``; a missing key is a TableError naming file and key."""
    node: Any = load(name)
    for depth, key in enumerate(keys):
        if not isinstance(node, dict) or key not in node:
            path = ".".join(keys[: depth + 1])
            raise TableError(f"mapping table {name}.toml has no key {path!r}")
        node = node[key]
    return node
