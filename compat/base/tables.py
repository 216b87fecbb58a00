"""Read the mapping tables shipped in ``compat.mapping_tables``.

Every fact about ReduceOps, dtypes, backends and API differences lives in those TOML files; this
module only loads them (once) and answers look-ups, naming the file and key when one is missing.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import cache
from typing import Any

from compat.base import schema, table_files

Table = dict[str, Any]


@cache
def load(name: str) -> Table:
    """Return the parsed table ``mapping_tables/<name>.toml``, checked against its schema.

    Raises
    ------
    TableError
        The file is missing, is not TOML, or does not match :mod:`compat.base.schema`; the message
        names the file (and the key).
    """
    table = table_files.read(name)
    schema.validate(name, table)
    return table


def names() -> list[str]:
    """The names of every shipped table (file names without ``.toml``), sorted."""
    return table_files.names()


def families() -> list[Table]:
    """The API-family tables (``api_<family>.toml``), in their recorded ``order``."""
    found = [load(name) for name in names() if name.startswith(schema.FAMILY_PREFIX)]
    return sorted(found, key=lambda table: table["order"])


def family(name: str) -> Table:
    """The table of API family ``name`` (e.g. ``"reduce_scatter"``)."""
    return load(schema.FAMILY_PREFIX + name)


def lookup(name: str, *keys: str) -> Any:
    """Return ``table[keys[0]][keys[1]]...``; a missing key is a TableError naming file and key."""
    return table_files.lookup(load(name), name, *keys)


def dtype_bytes() -> dict[str, int]:
    """Bytes an element, by dtype name (``dtypes.toml``'s ``bytes``): a dense tensor's size from
    its shape, where reading the size costs more than the product (MindSpore, compat.core.state)."""
    return {name: entry["bytes"] for name, entry in lookup("dtypes", "dtypes").items()}


def default_backend(framework: str, devices: Collection[str]) -> str:
    """The backend ``framework`` uses when none is asked for: the first ``default_backend`` entry
    of ``mapping_tables/frameworks.toml`` whose ``when`` is ``"always"`` or one of ``devices``
    (the adapter's :meth:`~compat.base.adapter.Adapter.device_kinds`, e.g. ``"cuda"``)."""
    for entry in lookup("frameworks", framework, "default_backend"):
        if entry["when"] == "always" or entry["when"] in devices:
            backend: str = entry["backend"]
            return backend
    raise ValueError(
        f"framework {framework!r}: no default backend for devices {sorted(devices)} "
        '(mapping_tables/frameworks.toml: end default_backend with when = "always")'
    )
