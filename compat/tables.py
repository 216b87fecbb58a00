"""Read the mapping tables shipped in ``compat.mapping_tables``.

Every fact about ReduceOps, dtypes, backends and API differences lives in those TOML files; this
module only loads them (once) and answers look-ups, naming the file and key when one is missing.
"""

from __future__ import annotations

import sys
from functools import cache
from importlib.resources import files
from typing import Any

from compat import schema
from compat.errors import TableError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

Table = dict[str, Any]


@cache
def load(name: str) -> Table:
    """Return the parsed table ``mapping_tables/<name>.toml``, checked against its schema.

    Raises
    ------
    TableError
        The file is missing, is not TOML, or does not match :mod:`compat.schema`; the message
        names the file (and the key).
    """
    resource = files("compat.mapping_tables").joinpath(f"{name}.toml")
    try:
        text = resource.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TableError(
            f"mapping table {name}.toml is missing from compat.mapping_tables"
        ) from None
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TableError(f"mapping table {name}.toml is not valid TOML: {exc}") from None
    schema.validate(name, table)
    return table


def names() -> list[str]:
    """The names of every shipped table (file names without ``.toml``), sorted."""
    folder = files("compat.mapping_tables")
    return sorted(
        entry.name[: -len(".toml")] for entry in folder.iterdir() if entry.name.endswith(".toml")
    )


def families() -> list[Table]:
    """The API-family tables (``api_<family>.toml``), in their recorded ``order``."""
    found = [load(name) for name in names() if name.startswith(schema.FAMILY_PREFIX)]
    return sorted(found, key=lambda table: table["order"])


def family(name: str) -> Table:
    """The table of API family ``name`` (e.g. ``"reduce_scatter"``)."""
    return load(schema.FAMILY_PREFIX + name)


def lookup(name: str, *keys: str) -> Any:
    """Return ``table[keys[0]][keys[1]]...``; a missing key is a TableError naming file and key."""
    node: Any = load(name)
    for depth, key in enumerate(keys):
        if not isinstance(node, dict) or key not in node:
            path = ".".join(keys[: depth + 1])
            raise TableError(f"mapping table {name}.toml has no key {path!r}")
        node = node[key]
    return node
