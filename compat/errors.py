"""The exceptions compat raises, beyond the built-in TypeError and ValueError."""

from __future__ import annotations


class UnsupportedError(NotImplementedError):
    """An op, dtype or argument that a backend cannot serve, not even by emulation.

    The message names what was asked for and what the backend supports.
    """


class NotInitializedError(RuntimeError):
    """A collective or query was called before :func:`compat.init`."""


class TableError(ValueError):
    """A mapping table is malformed; the message names the file and the key."""
