"""Read the TOML files shipped in ``compat.mapping_tables``, as parsed (not validated).

:mod:`compat.base.tables` validates what it reads against :mod:`compat.base.schema`; the schema's
cross-references (e.g. a backend's dtypes must be keys of ``dtypes.toml``) read the other tables
from here, so neither of those modules imports the other's importer.
"""

from __future__ import annotations

import sys
from importlib.resources import files
from typing import Any

from compat.base.errors import TableError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

Table = dict[str, Any]

PACKAGE = "compat.mapping_tables"


def read(name: str) -> Table:
    """The parsed ``mapping_tables/<name>.toml``; a missing or malformed file is a TableError."""
    resource = files(PACKAGE).joinpath(f"{name}.toml")
    try:
        text = resource.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TableError(f"mapping table {name}.toml is missing from {PACKAGE}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TableError(f"mapping table {name}.toml is not valid TOML: {exc}") from None


def names() -> list[str]:
    """The names of every shipped table (file names without ``.toml``), sorted."""
    folder = files(PACKAGE)
    return sorted(
        entry.name[: -len(".toml")] for entry in folder.iterdir() if entry.name.endswith(".toml")
    )


def lookup(table: Table, name: str, *keys: str) -> Any:
    """``table[keys[0]][keys[1]]...``; a missing key is a TableError naming ``<name>.toml``."""
    node: Any = table
    for depth, key in enumerate(keys):
        if not isinstance(node, dict) or key not in node:
            path = ".".join(keys[: depth + 1])
            raise TableError(f"mapping table {name}.toml has no key {path!r}")
        node = node[key]
    return node
