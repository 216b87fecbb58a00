"""The exceptions compat raises, beyond the built-in TypeError and ValueError."""

from __future__ import annotations


class UnsupportedError(NotImplementedError):
    """An op, dtype or argument that a backend cannot serve, not even by emulation.

    The message names what was asked for and what the backend supports.
    """


class UnsupportedReductionError(UnsupportedError, ValueError):
    """A ReduceOp that does not apply to the tensor's dtype (MAX, MIN, PRODUCT or a bitwise op on
    a complex tensor). A ValueError too, as torch's error for it, so ported code that catches
    either runs the same."""


class NotInitializedError(RuntimeError, ValueError):
    """A collective or query was called before :func:`compat.init`. A ValueError too, as
    torch's error for a call before ``init_process_group`` is: ported code that catches it
    (``except ValueError: return 0``) keeps working."""


class AlreadyInitializedError(RuntimeError, ValueError):
    """:func:`compat.init` was called while compat is initialised. A ValueError too, as torch's
    error for ``init_process_group`` called twice is."""


class TableError(ValueError):
    """A mapping table is malformed; the message names the file and the key."""


class CollectiveMismatchError(RuntimeError):
    """Ranks called a collective with arguments that do not agree (different collectives, shapes,
    dtypes, ops, roots or split sizes). Raised by the pre-flight check on every rank of the
    group, before the real collective runs; the message names the ranks and what differs."""


class CollectiveTimeout(TimeoutError, RuntimeError):
    """A collective did not complete within the bound (a rank did not join it, or died).

    A RuntimeError too, as torch's timeout errors are (``DistBackendError``, Gloo's "Timed
    out"): ported code that catches them (``except RuntimeError:`` around a
    ``monitored_barrier``) keeps working.

    The backend's communicator is no longer usable afterwards (Gloo closes its connections):
    end the job."""


class PeerLostError(RuntimeError):
    """A rank of the group ended (its process was killed, crashed or exited) while this rank
    waited for it: raised within a fraction of a second on every rank that waits for it in
    compat's shared memory, naming it. The group cannot be used afterwards (each later call on
    it raises this at once): end the job, as after Gloo's "Connection reset by peer"."""


class StoreTimeout(RuntimeError):
    """A key-value store's blocking ``get`` or ``wait`` found no value for a key within the
    store's timeout. A RuntimeError, as torch's ``DistStoreError`` (which torch's own stores
    raise) is, so code that catches either runs on both frameworks."""
