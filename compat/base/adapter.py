"""The interface every framework adapter implements.

compat checks and normalises the arguments, then calls these methods; an adapter only translates
them to its framework. By the time a method is called: ``op`` is a ReduceOp the backend reduces
natively for that dtype, ``group`` is the framework's own group handle (``None`` = the world),
ranks (``src``, ``dst``) are global ranks, split sizes are lists of ints that fit the tensors, and
output tensors have the right shape and dtype. A method returns a :class:`Handle` when
``async_op`` is true, else ``None`` after the call has completed.
"""

from __future__ import annotations

import functools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

import numpy as np

from compat.base.errors import CollectiveTimeout, UnsupportedError
from compat.base.types import Handle, ReduceOp

Tensor = Any
GroupHandle = Any
#: A dense tensor's dtype name and shape (Adapter.dense_facts).
TensorFacts = tuple[str, tuple[int, ...]]

#: A collective's bound where the backend says none: torch's default timeout of a process group.
DEFAULT_TIMEOUT_SECONDS = 1800.0


@dataclass(frozen=True)
class StoreAddress:
    """Where a TCP key-value store is and how to reach it (compat.TCPStore's checked
    arguments); ``timeout`` bounds each blocking get and each attempt to connect, and
    ``connect_within`` (None: ``timeout``) bounds connecting, attempts repeated until then."""

    host: str
    port: int
    world_size: int | None
    is_master: bool
    timeout: timedelta
    wait_for_workers: bool
    connect_within: timedelta | None = None


class StoreClient(Protocol):
    """A framework's TCP store connection: what MindSpore's TCPStore offers."""

    def set(self, key: str, value: str | bytes) -> None: ...
    def get(self, key: str) -> bytes: ...
    def add(self, key: str, amount: int) -> int: ...
    def delete_key(self, key: str) -> bool: ...


@dataclass(frozen=True)
class LinearLayer:
    """One of the framework's linear layers (``y = x @ weight.T + bias``, weight shaped
    (out, in)) as compat's tensor-parallel emulation sees it: its parameters by attribute name,
    and the activation it applies after the bias, by name (MindSpore's Dense), or None."""

    weight: Any
    bias: Any | None
    activation: str | None


@dataclass(frozen=True)
class Rendezvous:
    """How this process joins the job: ``torch.distributed.init_process_group``'s arguments, as
    compat.init checked them. All None: a launcher's environment, else a world of one."""

    #: ``env://``, ``tcp://host:port`` or ``file://path``
    init_method: str | None = None
    rank: int | None = None
    world_size: int | None = None
    #: a framework's key-value store to meet through (torch's ``store=``; with rank and
    #: world_size, without init_method)
    store: object = None
    #: the device this process uses: an index, or the framework's device object
    device_id: object = None
    #: the backend's own options (torch's ``pg_options=``)
    pg_options: object = None


def device_backend(backend: str, device_kinds: Collection[str]) -> str:
    """The backend that serves this process's device, from a backend string as torch takes it:
    ``backend`` itself (lower case), or for a string naming one per device
    (``"cpu:gloo,cuda:nccl"``,
    in any order) the entry of an accelerator in ``device_kinds`` (the adapter's
    :meth:`Adapter.device_kinds`), else the CPU's: the device compat's tensors live on."""
    if ":" not in backend:
        return backend.strip().lower()
    entries: dict[str, str] = {}
    for part in backend.split(","):
        device, _, name = part.partition(":")
        entries[device.strip().lower()] = name.strip().lower()
    for kind in sorted(device_kinds):
        if kind in entries:
            return entries[kind]
    return entries.get("cpu", next(iter(entries.values())))


#: One op of a batch_isend_irecv: ``("isend" | "irecv", tensor, global rank of the peer, tag)``.
P2PSpec = tuple[str, Tensor, int, int]

#: The adapter methods that communicate (the ones whose failures adapters translate).
COLLECTIVES = (
    "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
    "reduce_scatter_tensor", "broadcast", "scatter", "gather", "reduce", "all_to_all_single",
    "all_to_all", "send", "recv", "isend", "irecv", "batch_isend_irecv", "barrier",
)  # fmt: skip


#: translate(error, seconds since the collective started) -> the exception to raise
Translate = Callable[[Exception, float], Exception]


class _TranslatingHandle:
    """A native pending handle whose ``wait`` raises compat's errors instead of the native ones."""

    __slots__ = ("_handle", "_started", "_translate")

    def __init__(self, handle: Handle, translate: Translate, started: float) -> None:
        self._handle = handle
        self._translate = translate
        self._started = started

    def wait(self, timeout: Any = None) -> Any:
        try:
            if timeout is None:
                return self._handle.wait()
            return self._handle.wait(timeout)
        except CollectiveTimeout:
            raise  # already compat's (a RuntimeError too): not translated again
        except RuntimeError as error:
            raise self._translate(error, time.monotonic() - self._started) from error

    def is_completed(self) -> bool:
        return self._handle.is_completed()

    def get_future(self) -> Any:
        """The native handle's future (torch's Work.get_future); AttributeError without one."""
        return self._handle.get_future()  # type: ignore[attr-defined]


def numpy_elementwise(entry: dict[str, str]) -> Any:
    """The numpy ufunc that reduces two arrays for a reduce_ops.toml entry: its ``numpy`` function,
    or for AVG (whose ``numpy`` function, mean, is not element-wise) its ``elementwise`` one."""
    function = getattr(np, entry["numpy"])
    return function if isinstance(function, np.ufunc) else getattr(np, entry["elementwise"])


def reduce_arrays(target: Any, sources: Sequence[Any], combine: Any, average: bool) -> None:
    """Write the element-wise reduction of numpy arrays ``sources`` (same shape and dtype) into
    ``target`` with the two-array ufunc ``combine``, in order; ``average``: then divide by their
    count (AVG). numpy's ufuncs run on the calling thread: a reduction beside the other ranks
    of one host starts no thread team that competes with theirs for the cores."""
    if len(sources) == 1:
        target[...] = sources[0]
        return
    if any(np.may_share_memory(target, source) for source in sources[2:]):
        target[...] = functools.reduce(combine, sources)
    else:
        combine(sources[0], sources[1], out=target)
        for source in sources[2:]:
            combine(target, source, out=target)
    if average:
        np.divide(target, len(sources), out=target)


def element_extent(shape: Sequence[int], strides: Sequence[int]) -> int:
    """The elements from a non-empty tensor's first to its last, both counted, for ``shape``
    and non-negative ``strides`` (in elements): what its memory spans."""
    return 1 + sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True))


def translating_errors(cls: type, translate_for: Callable[[str], Translate]) -> type:
    """A subclass of ``cls`` whose COLLECTIVES translate native errors (and those of their
    handles) with ``translate_for(collective)``: the adapters' way of raising
    compat.CollectiveTimeout. ``cls`` itself is left as it is. compat calls these methods with
    positional arguments only, which is all the subclass's methods take."""

    # Positional arguments only, and no test of the result's type where it cannot be a list:
    # right after a collective every Python step shows in a small point-to-point call's time.
    def wrap(name: str) -> Callable[..., Any]:
        method = getattr(cls, name)
        translate = translate_for(name)

        @functools.wraps(method)
        def wrapper(self: Any, *args: Any) -> Any:
            started = time.monotonic()
            try:
                result = method(self, *args)
            except CollectiveTimeout:
                raise
            except RuntimeError as error:
                raise translate(error, time.monotonic() - started) from error
            return None if result is None else _TranslatingHandle(result, translate, started)

        @functools.wraps(method)
        def wrapper_per_op(self: Any, *args: Any) -> Any:  # batch_isend_irecv: a list
            started = time.monotonic()
            try:
                result = method(self, *args)
            except CollectiveTimeout:
                raise
            except RuntimeError as error:
                raise translate(error, time.monotonic() - started) from error
            return [_TranslatingHandle(item, translate, started) for item in result]

        return wrapper_per_op if name == "batch_isend_irecv" else wrapper

    namespace = {name: wrap(name) for name in COLLECTIVES}
    return type(cls.__name__, (cls,), {**namespace, "__doc__": cls.__doc__})


class Adapter(ABC):
    """One framework's collectives and the few local tensor operations compat needs."""

    #: The key of this framework in ``mapping_tables/frameworks.toml``.
    framework: str
    #: What the framework's own groups are, for error messages ("a torch ProcessGroup").
    native_group_names: str

    # -- lifecycle -------------------------------------------------------------------------
    @abstractmethod
    def init(self, backend: str | None, timeout: timedelta | None, rendezvous: Rendezvous) -> str:
        """Join the job and return the backend in use.

        If the framework's own process group is already initialised (the user's script called
        ``init_process_group``), adopt it instead: its backend is returned, and :meth:`destroy`
        leaves it alive. Else join as ``rendezvous`` says (checked by compat.init), or as a
        launcher's environment says, or as a world of one process.
        """

    @abstractmethod
    def destroy(self) -> None:
        """Leave the job: the framework's process group too, unless it was adopted."""

    @abstractmethod
    def rank(self) -> int: ...

    @abstractmethod
    def world_size(self) -> int: ...

    @abstractmethod
    def new_group(
        self,
        ranks: Sequence[int],
        name: str,
        timeout: timedelta | None,
        backend: str | None,
        *,
        members_only: bool = False,
        options: object = None,
        description: str | None = None,
    ) -> GroupHandle:
        """Create a group named ``name`` (the same on every member); called on every rank, in
        the same order, or with ``members_only`` on the members only (torch's
        ``use_local_synchronization=True``). Returns None on ranks outside ``ranks``; never a
        handle that means another group (the world). ``options``: the backend's options
        (torch's ``pg_options``), None for none; ``description``: the user's description of the
        group, where the framework keeps one apart from its name (torch's ``group_desc``)."""

    @abstractmethod
    def destroy_group(self, group: GroupHandle) -> None:
        """Free a group made by :meth:`new_group` (or the user's, through the framework)."""

    @abstractmethod
    def group_ranks(self, group: GroupHandle) -> list[int]:
        """The global ranks of ``group`` (None = the world), in group-rank order."""

    def joined_by_the_world(self, group: GroupHandle) -> bool:
        """Whether ``group`` was made through this world (its ranks meet as the world's do),
        not for processes of other worlds."""
        return True

    def own_global_rank(self, group: GroupHandle) -> int:
        """This process's global rank as ``group``'s own rank map names it, which a rooted call's
        ``src``/``dst`` is compared with: its world rank, except on a group made for processes of
        other worlds (torch's _new_process_group_helper), whose map is its own."""
        return self.rank()

    def own_group_rank(self, group: GroupHandle) -> int:
        """This process's rank in ``group`` as the backend numbers it (-1: not a member). Where
        groups are made from global ranks, its place among :meth:`group_ranks`."""
        ranks = self.group_ranks(group)
        rank = self.rank()
        return ranks.index(rank) if rank in ranks else -1

    #: whether the framework's process group was initialised outside compat (then adopted)
    _adopted = False

    #: split_group's rules where torch's versions differ (compat.split_group follows the
    #: installed one's): whether a split's group ranks follow the order its list gives (else
    #: sorted), and what a rank in no split gets.
    split_keeps_listed_order = False
    outside_split: object = None

    def destroy_adopted(self) -> None:
        """Leave the job and end the framework's process group even where compat adopted it,
        as ``torch.distributed.destroy_process_group()`` ends the default group whoever made
        it."""
        self._adopted = False
        self.destroy()

    # -- key-value stores (compat.store) ----------------------------------------------------
    def store_class(self, kind: str) -> type | None:
        """The framework's own store class named ``kind`` ("Store", "TCPStore", "HashStore",
        "PrefixStore") where it has torch's whole interface (compat then returns the
        framework's object itself), else None (compat serves that kind). Default None."""
        return None

    def framework_store(self, kind: str, args: Sequence[object]) -> object:
        """A new store of the framework's own class ``kind`` (see :meth:`store_class`), made
        from ``args`` in torch's positional order."""
        raise UnsupportedError(f"{self.framework} has no store class {kind}")

    def store_client(self, address: StoreAddress) -> StoreClient:
        """A connection to the TCP key-value store at ``address`` (its server, if
        ``address.is_master``): the framework's set/get/add/delete_key."""
        raise UnsupportedError(f"{self.framework} has no TCP key-value store")

    # -- device meshes (compat.mesh) ---------------------------------------------------------
    def device_mesh_class(self) -> type | None:
        """The framework's own device-mesh class (torch's DeviceMesh) once the program has
        imported its module, else None: compat's DeviceMesh serves. Default None."""
        return None

    def framework_device_mesh(
        self,
        device_type: str,
        mesh_shape: tuple[int, ...],
        mesh_dim_names: tuple[str, ...] | None,
        backend_override: object,
    ) -> object | None:
        """The framework's own device mesh, made by its ``init_device_mesh`` (arguments checked
        by compat), or None where the framework has none (compat then makes its own)."""
        return None

    def framework_device_mesh_of(
        self, device_type: str, ranks: list[Any], mesh_dim_names: tuple[str, ...] | None
    ) -> object | None:
        """The framework's own device mesh of that explicit array of global ranks (nested
        lists), made by its DeviceMesh constructor, or None where the framework has none."""
        return None

    # -- DTensor and tensor parallel (compat.tensor) ----------------------------------------
    def tensor_api(self, name: str, submodule: str = "") -> object | None:
        """The framework's own object ``name`` of its DTensor package (torch's
        ``torch.distributed.tensor``, or its ``submodule`` such as "parallel"), or None where
        the framework has none: compat's own emulation serves. Default None."""
        return None

    # -- modules (compat.tensor.parallel's emulation, where the framework has no DTensor) -----
    def module_children(self, module: object) -> list[tuple[str, object]] | None:
        """The direct submodules of ``module`` by attribute name, in order, if it is one of the
        framework's modules (MindSpore's Cell), else None. Default None."""
        return None

    def linear_layer(self, module: object) -> LinearLayer | None:
        """``module``'s parameters if it is one of the framework's linear layers the
        emulation shards, else None. Default None."""
        return None

    def replace_parameter(self, module: object, name: str, value: Tensor) -> None:
        """Make ``value`` the module's parameter ``name`` (keeping its name and whether it
        takes gradients)."""
        raise UnsupportedError(f"{self.framework}: compat replaces no module parameters")

    def add_forward_hooks(
        self,
        module: object,
        before: Callable[[Tensor], Tensor],
        after: Callable[[Tensor], Tensor],
    ) -> None:
        """Run ``before`` on the module's first input before its forward and ``after`` on its
        output after it, in the framework's autograd (PyNative forward hooks on MindSpore)."""
        raise UnsupportedError(f"{self.framework}: compat hooks no modules")

    @abstractmethod
    def framework_group(self, group: GroupHandle, member: bool) -> object:
        """The framework's own object for ``group`` (a handle; None: the world, or a group
        this rank is not a ``member`` of): what the framework's functions take as a group."""

    @abstractmethod
    def backend_available(self, backend: str) -> bool:
        """Whether the framework can run ``backend`` here (compat.is_backend_available)."""

    def registers_backend(self, backend: str) -> bool:
        """Whether the framework itself has a backend named ``backend`` (a plugin's too:
        torch_musa registers "mccl" with torch), which then wins over compat's alias of another
        framework's name (``backend_aliases``). Default False."""
        return False

    def process_group_alive(self) -> bool:
        """Whether the framework's process group still exists: code compat does not own may
        end it (torch.distributed.destroy_process_group called directly). Default True: the
        framework cannot tell."""
        return True

    def group_backend(self, group: GroupHandle) -> str | None:
        """The backend ``group`` (a handle, not the world) was made with, where the framework
        records one per group (torch: ``new_group(backend=)``); None: the world's."""
        return None

    @abstractmethod
    def native_group(self, obj: object) -> tuple[list[int], GroupHandle] | None:
        """If ``obj`` is the framework's own group (a torch ProcessGroup, incl.
        ``dist.group.WORLD``; a MindSpore group name), its global ranks and the handle the
        collectives take (None for the world); else None. A group object that tells this rank
        is not a member raises ValueError naming ``group``."""

    # -- local tensor facts and operations ------------------------------------------------
    @abstractmethod
    def shape(self, tensor: Tensor) -> tuple[int, ...]: ...

    @abstractmethod
    def dtype(self, tensor: Tensor) -> str:
        """The canonical dtype name (a key of ``mapping_tables/dtypes.toml``)."""

    @abstractmethod
    def device(self, tensor: Tensor) -> str: ...

    @abstractmethod
    def home_device(self) -> str:
        """This rank's device, decided at :meth:`init` (``"cpu"`` on a CPU backend): where the
        backend communicates from, and where compat makes the tensors it needs."""

    @abstractmethod
    def on_home(self, tensor: Tensor) -> bool:
        """Whether the backend can communicate ``tensor`` where it is (on the home device)."""

    @abstractmethod
    def empty(self, shape: Sequence[int], like: Tensor) -> Tensor:
        """A new uninitialised tensor of ``like``'s dtype and device."""

    @abstractmethod
    def assign(self, dst: Tensor, src: Tensor) -> None:
        """Copy ``src`` (of ``dst``'s shape) into ``dst`` in place, through the framework's own
        in-place copy, which its autograd differentiates (unlike :meth:`copy_`)."""

    @abstractmethod
    def zeros(self, shape: Sequence[int], like: Tensor) -> Tensor:
        """A new tensor of zeros of ``like``'s dtype and device."""

    @abstractmethod
    def is_dense(self, tensor: Tensor) -> bool:
        """True if the backend reads and writes exactly ``tensor``'s elements when given it as it
        is; False for a view it would read or write as something else (see compat.core.layout)."""

    @abstractmethod
    def clone(self, tensor: Tensor) -> Tensor:
        """A new dense tensor with ``tensor``'s values (any layout), on its device."""

    @abstractmethod
    def as_bytes(self, tensor: Tensor) -> Tensor:
        """``tensor`` (of a one-byte dtype) viewed as uint8: the same memory and shape, no copy
        (capabilities.toml's ``as_bytes``, compat.core.layout)."""

    @abstractmethod
    def as_real(self, tensor: Tensor) -> Tensor:
        """``tensor`` (a dense complex tensor) viewed as real numbers: the same memory, its shape
        with a trailing dimension of 2 (real, imaginary), no copy, as ``torch.view_as_real``
        (capabilities.toml's ``as_real``, compat.core.layout)."""

    def dense_dtype(self, tensor: Tensor) -> str | None:
        """``tensor``'s dtype name if it is on the home device, dense and not empty, else None:
        what a plain point-to-point call checks, in one call (an adapter may answer it with
        fewer reads)."""
        if self.on_home(tensor) and self.is_dense(tensor) and self.numel(tensor) > 0:
            return self.dtype(tensor)
        return None

    def dense_facts(self, tensor: Tensor) -> TensorFacts | None:
        """``tensor``'s dtype name and shape if it is on the home device, dense and not empty,
        else None: what the common case of a collective checks of each of its tensors, in one
        call (an adapter may answer it with fewer reads)."""
        dtype = self.dense_dtype(tensor)
        return None if dtype is None else (dtype, self.shape(tensor))

    def numel(self, tensor: Tensor) -> int:
        """The number of elements of ``tensor``."""
        count = 1
        for size in self.shape(tensor):
            count *= size
        return count

    @abstractmethod
    def split(self, tensor: Tensor, sizes: Sequence[int], dim: int = 0) -> list[Tensor]:
        """Views of ``tensor`` along ``dim`` (no copy)."""

    @abstractmethod
    def movedim(self, tensor: Tensor, source: int, destination: int) -> Tensor:
        """The view of ``tensor`` with dim ``source`` moved to ``destination`` (no copy; the
        functional collectives' ``dim=`` stages it through compat.core.layout)."""

    def narrow(self, tensor: Tensor, start: int, length: int) -> Tensor:
        """The view of rows ``start`` to ``start + length`` of ``tensor``'s dim 0."""
        rest = self.shape(tensor)[0] - start - length
        return self.split(tensor, [start, length, rest])[1]

    @abstractmethod
    def cat(self, tensors: Sequence[Tensor], dim: int) -> Tensor:
        """The concatenation of same-device tensors along ``dim``, as a new tensor."""

    @abstractmethod
    def canonical_device(self, spec: object) -> str | None:
        """The device ``spec`` names, as :meth:`device` spells it, or None if it names none.

        Only parses the spelling (``torch.device("cpu")``, ``"CPU"``, ...); whether this host
        has the device is :meth:`available_devices`' answer.
        """

    @abstractmethod
    def available_devices(self) -> list[str]:
        """The devices this process can put tensors on, as :meth:`device` spells them."""

    @abstractmethod
    def to_device(self, tensor: Tensor, device: str) -> Tensor:
        """A contiguous copy of ``tensor`` on ``device`` (one of :meth:`available_devices`).

        Always a new tensor, also when ``tensor`` is already on ``device``.
        """

    @abstractmethod
    def synchronize(self) -> None:
        """Wait for queued local operations; raise the error of one that failed."""

    def execution_note(self) -> str | None:
        """What a reader of this framework's timings must know of how it runs operations (for
        ``compat bench``'s header), or None: nothing beyond the framework and backend."""
        return None

    @abstractmethod
    def copy_(self, dst: Tensor, src: Tensor) -> None: ...

    @abstractmethod
    def reduce_local(self, tensors: Sequence[Tensor], op: ReduceOp) -> Tensor:
        """The element-wise reduction of same-shaped tensors, as a new tensor (emulations)."""

    @abstractmethod
    def shares_memory(self, pieces: Sequence[Tensor], whole: Tensor) -> bool:
        """True if ``pieces`` are consecutive dim-0 views that exactly tile ``whole``."""

    def memory_span(self, tensor: Tensor) -> tuple[int, int] | None:
        """The addresses ``[start, end)`` that ``tensor``'s elements lie within (its first
        element's address to one past its last element's), which tells whether two tensors may
        share memory; None where the framework cannot tell (then callers assume they may)."""
        return None

    # Performance hooks (compat.algorithms): the defaults are correct everywhere; an adapter
    # overrides them where its framework can do better.
    def joined(self, pieces: Sequence[Tensor]) -> Tensor | None:
        """The tensor that ``pieces`` (consecutive contiguous dim-0 views of one buffer) tile,
        as a view without a copy; None when they do not tile one (then callers concatenate)."""
        return None

    def parts(self, tensor: Tensor, sizes: Sequence[int]) -> list[Tensor]:
        """Consecutive dim-0 parts of ``tensor`` over its memory (no copy), made as cheaply as
        the framework allows, for the algorithms to send from and receive into. Default:
        :meth:`split`; one part is ``tensor`` itself (a scatter on one rank cuts nothing)."""
        if len(sizes) == 1:
            return [tensor]
        return self.split(tensor, sizes)

    def flat_view(self, tensor: Tensor) -> Tensor | None:
        """A 1-d tensor over ``tensor``'s elements (same memory, no copy: writes to it land in
        ``tensor``), or None where the framework cannot give one (then callers cut dim 0)."""
        return None

    def shaped_view(self, tensor: Tensor, shape: Sequence[int]) -> Tensor | None:
        """``tensor``'s elements in row-major order as a tensor of ``shape`` (same memory, no
        copy), or None where the framework cannot give one (a non-contiguous tensor)."""
        return None

    def one_buffer(self, tensors: Sequence[Tensor]) -> tuple[Tensor, Callable[[], None]] | None:
        """``tensors`` (non-empty, of one dtype, any layout) as one 1-d tensor of their elements
        in list order, and what copies its elements back into them (after a collective changed
        it in place): the buffer they tile in list order (``x.chunk(n)``), without a copy, with
        nothing to copy back; else a new tensor, its elements copied in now. None where the
        framework cannot (no flat views). Default: :meth:`flat_view` of each (of a dense copy
        where it is not contiguous), :meth:`joined`, else :meth:`cat`, :meth:`parts` and
        :meth:`copy_`."""
        flats, staged = [], []
        for tensor in tensors:
            flat = self.flat_view(tensor)
            if flat is None:  # not contiguous: copied in and out through a dense copy
                if self.is_dense(tensor):
                    return None
                dense = self.clone(tensor)
                flat = self.flat_view(dense)
                if flat is None:
                    return None
                staged.append((tensor, dense))
            flats.append(flat)
        whole = self.joined(flats)
        copied = whole is None
        results: list[Tensor] = []
        if copied:
            whole = self.cat(flats, 0)
            results = self.parts(whole, [self.numel(flat) for flat in flats])

        def copy_back() -> None:
            if copied:
                for flat, result in zip(flats, results, strict=True):
                    self.copy_(flat, result)
            for tensor, dense in staged:
                self.copy_(tensor, dense)

        return whole, copy_back

    def collective_timeout(self) -> float:
        """The seconds after which the backend gives up on a collective a rank did not join; the
        shared-memory algorithms wait as long (compat.transport.shared_memory)."""
        return DEFAULT_TIMEOUT_SECONDS

    def in_host_memory(self, tensor: Tensor) -> bool:
        """True if ``tensor``'s memory is the process's own (a CPU tensor), which
        :meth:`host_tensor` tensors can be copied to and from. Default: False."""
        return False

    def host_tensor(self, memory: memoryview, offset: int, numel: int, like: Tensor) -> Tensor:
        """A 1-d tensor of ``numel`` elements of ``like``'s dtype over ``memory`` from byte
        ``offset`` (no copy: writes to it land in ``memory``), for the shared-memory algorithms
        (compat.transport.shared_memory). Only called where :meth:`in_host_memory` said True."""
        raise NotImplementedError(f"{type(self).__name__} has no tensors over host memory")

    def host_address(self, tensor: Tensor) -> int:
        """The address of a dense (contiguous) tensor's first element in this process's memory:
        compat.transport.mailbox copies its :meth:`nbytes` bytes from or to there. Only called where
        :meth:`in_host_memory` said True."""
        raise NotImplementedError(f"{type(self).__name__} has no tensors in host memory")

    def reduce_into(self, out: Tensor, tensors: Sequence[Tensor], op: ReduceOp) -> None:
        """Write the element-wise reduction of ``tensors`` into ``out`` (which may be a view)."""
        self.copy_(out, self.reduce_local(tensors, op))

    def nbytes(self, tensor: Tensor) -> int:
        """The size of ``tensor``'s data in bytes."""
        size: int = tensor.nbytes
        return size

    @abstractmethod
    def bytes_tensor(self, data: bytes | memoryview) -> Tensor:
        """A 1-d uint8 tensor holding ``data`` on the home device (the pre-flight check's
        descriptors, the object collectives' bytes). A writable memoryview may become the
        tensor's memory, without a copy: the caller gives it up."""

    @abstractmethod
    def to_bytes(self, tensor: Tensor) -> bytes: ...

    @abstractmethod
    def bytes_view(self, tensor: Tensor) -> memoryview:
        """The bytes of a contiguous 1-d uint8 ``tensor``, read where they lie when they are in
        host memory (no copy; valid while the tensor lives and is not written)."""

    @abstractmethod
    def differentiable(
        self, forward: Callable[[Tensor], Tensor], backward: Callable[[Tensor], Tensor]
    ) -> Callable[[Tensor], Tensor]:
        """``forward`` as a function the framework differentiates with ``backward`` (which maps
        the result's gradient to the input's): torch autograd / mindspore.grad."""

    # -- collectives (native translation only) ---------------------------------------------
    @abstractmethod
    def all_reduce(
        self, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
    ) -> Handle | None: ...

    @abstractmethod
    def all_gather(
        self, tensor_list: list[Tensor], tensor: Tensor, group: GroupHandle, async_op: bool
    ) -> Handle | None: ...

    @abstractmethod
    def all_gather_into_tensor(
        self, output: Tensor, tensor: Tensor, group: GroupHandle, async_op: bool
    ) -> Handle | None: ...

    @abstractmethod
    def reduce_scatter(
        self,
        output: Tensor,
        input_list: list[Tensor],
        op: ReduceOp,
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None: ...

    @abstractmethod
    def reduce_scatter_tensor(
        self, output: Tensor, tensor: Tensor, op: ReduceOp, group: GroupHandle, async_op: bool
    ) -> Handle | None: ...

    @abstractmethod
    def broadcast(
        self, tensor: Tensor, src: int, group: GroupHandle, async_op: bool
    ) -> Handle | None: ...

    @abstractmethod
    def scatter(
        self,
        tensor: Tensor,
        scatter_list: list[Tensor] | None,
        src: int,
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None: ...

    @abstractmethod
    def gather(
        self,
        tensor: Tensor,
        gather_list: list[Tensor] | None,
        dst: int,
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None: ...

    @abstractmethod
    def reduce(
        self, tensor: Tensor, dst: int, op: ReduceOp, group: GroupHandle, async_op: bool
    ) -> Handle | None: ...

    @abstractmethod
    def all_to_all_single(
        self,
        output: Tensor,
        tensor: Tensor,
        output_split_sizes: list[int],
        input_split_sizes: list[int],
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None: ...

    @abstractmethod
    def all_to_all(
        self,
        output_tensor_list: list[Tensor],
        input_tensor_list: list[Tensor],
        group: GroupHandle,
        async_op: bool,
    ) -> Handle | None:
        """``input_tensor_list[i]`` to group rank i, ``output_tensor_list[j]`` from group rank
        j; dim 0 may differ per pair."""

    #: Why this framework's point-to-point calls cannot match messages by ``tag``, or None if
    #: they can: compat then refuses a ``tag`` other than 0 (UnsupportedError naming ``tag``)
    #: before any communication, and the methods below are only called with ``tag=0``.
    p2p_tag_unsupported: str | None = None

    @abstractmethod
    def send(self, tensor: Tensor, dst: int, group: GroupHandle, tag: int = 0) -> None:
        """Send ``tensor`` to global rank ``dst``; a receive matches it by ``tag`` (an int >= 0,
        as torch's)."""

    @abstractmethod
    def recv(self, tensor: Tensor, src: int, group: GroupHandle, tag: int = 0) -> None: ...

    @abstractmethod
    def isend(self, tensor: Tensor, dst: int, group: GroupHandle, tag: int = 0) -> Handle:
        """Start sending ``tensor`` to global rank ``dst``; ``tensor`` must stay unchanged until
        the handle has completed."""

    @abstractmethod
    def irecv(self, tensor: Tensor, src: int, group: GroupHandle, tag: int = 0) -> Handle:
        """Start receiving into ``tensor`` what global rank ``src`` sends with ``tag``; valid
        once the handle has completed."""

    @abstractmethod
    def batch_isend_irecv(self, p2p_ops: list[P2PSpec], group: GroupHandle) -> list[Handle]:
        """Issue every ``("isend" | "irecv", tensor, global peer, tag)`` of ``p2p_ops`` on
        ``group`` at once (torch's batch_isend_irecv); one handle per op, or one for the whole
        batch where the backend coalesces them."""

    @abstractmethod
    def barrier(
        self, group: GroupHandle, async_op: bool, device_ids: list[int] | None = None
    ) -> Handle | None:
        """Block until every rank of ``group`` has arrived (a handle with ``async_op``).
        ``device_ids``: torch's, checked by compat (a non-empty list of device indices); what the
        framework does with it is recorded in api_barrier.toml."""

    def monitored_barrier(self, group: GroupHandle, timeout: float, wait_all_ranks: bool) -> None:
        """A barrier that raises, within ``timeout`` seconds, on every rank that waited, naming
        the ranks that did not arrive. No framework has one (torch's raises on rank 0 only, on
        Gloo only): the capability table names compat.algorithms.reported_barrier."""
        raise NotImplementedError("no native monitored_barrier: see capabilities.toml")

    @abstractmethod
    def send_within(self, tensor: Tensor, dst: int, group: GroupHandle, seconds: float) -> bool:
        """Send ``tensor`` to global rank ``dst``; False if it has not completed within
        ``seconds`` (or failed). It may then stay pending: only for a job that ends in an error
        (compat.algorithms.reported_barrier)."""

    @abstractmethod
    def recv_within(self, tensor: Tensor, src: int, group: GroupHandle, seconds: float) -> bool:
        """Receive into ``tensor`` from global rank ``src``; False if nothing arrived within
        ``seconds`` (or it failed). As :meth:`send_within`, it may stay pending."""

    def keep_pending(self, handles: Sequence[Handle]) -> None:
        """Hold ``handles``, a monitored_barrier's sends to and receives from peers that never
        came (compat.algorithms.reported_barrier_in_memory), until :meth:`destroy`, which ends
        them: their tensors' memory must outlive them."""
        raise NotImplementedError(f"{type(self).__name__} keeps no pending handles")

    # -- framework facts for compat's tools ------------------------------------------------
    def device_kinds(self) -> set[str]:
        """The accelerators this process can use, as ``default_backend[].when`` in
        ``mapping_tables/frameworks.toml`` names them (``"cuda"``, ``"ascend"``; empty: CPU
        only). ``init`` picks its default backend by them
        (:func:`compat.base.tables.default_backend`).
        """
        return set()
