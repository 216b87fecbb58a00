"""Bad input: each raises the right exception on the calling rank, before any communication,
with a message that names the parameter and says what was expected and what was given; the
buffers stay as they were; and the next collective on every rank still gives the right result.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import compat
from compat.base import tables
from tests.ranks.cases import follow_up, rank, register, sentinel, subgroup, world
from tests.ranks.kit import foreign_tensors


def expect_error(
    kit: Any,
    error: type[BaseException],
    call: Callable[[], object],
    param: str,
    fragments: list[str],
    buffers: list[Any],
    start: str | None = None,
    snapshot: Callable[[Any, Any], np.ndarray] | None = None,
) -> BaseException:
    """``call`` raises ``error`` (returned), whose message starts with ``start`` (default
    ``param:``) and holds every fragment; ``buffers`` keep their values (``snapshot(kit,
    buffer)`` of each, default ``kit.numpy``'s)."""
    take = snapshot or (lambda kit, buffer: kit.numpy(buffer))
    snapshots = [take(kit, buffer) for buffer in buffers]
    try:
        call()
    except error as exc:
        raised = exc
    else:
        raise AssertionError(f"expected {error.__name__} naming {param}; nothing was raised")
    message, start = str(raised), start or f"{param}:"
    assert message.startswith(start), f"message does not start with {start!r}: {message}"
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from the message: {message}"
    for buffer, before in zip(buffers, snapshots, strict=True):
        np.testing.assert_array_equal(take(kit, buffer), before, "a buffer was modified")
    return raised


def refused_reduction(
    kit: Any,
    dtype: str,
    op: str,
    call: Callable[[], object],
    param: str,
    buffers: list[Any],
    *,
    reason: str,
    error: type[BaseException] = compat.UnsupportedError,
    snapshot: Callable[[Any, Any], np.ndarray] | None = None,
) -> BaseException:
    """``call`` (a reduction with ``op`` of a ``dtype`` tensor) raises ``error`` naming
    ``param``, ``op`` and ``dtype``, and giving ``reason``; ``buffers`` keep their values."""
    start = f"{param}: {op} cannot reduce dtype {dtype}: "
    return expect_error(kit, error, call, param, [reason], buffers, start, snapshot)


def bad_case(name: str, min_world: int = 1, frameworks: tuple[str, ...] = ("torch", "mindspore")):
    """Register a bad-input case; every rank then runs the follow-up collective."""

    def decorate(function: Callable[[Any], None]) -> Callable[[Any], None]:
        def run(kit: Any) -> None:
            function(kit)
            follow_up(kit)

        register(f"bad_input[{name}]", run, min_world, frameworks)
        return function

    return decorate


def f32(kit: Any, shape: tuple[int, ...], fill: float = 1.0) -> Any:
    return kit.tensor(np.full(shape, fill), "float32")


@bad_case("input_list_length")
def _(kit: Any) -> None:
    out = sentinel(kit, (2,), "float32")
    inputs = [f32(kit, (2,)) for _ in range(world() + 1)]
    expect_error(
        kit,
        ValueError,
        lambda: compat.reduce_scatter(out, inputs),
        "input_list",
        [f"{world()} tensors", f"got {world() + 1}"],
        [out, *inputs],
    )


@bad_case("input_list_element_shape")
def _(kit: Any) -> None:
    out = sentinel(kit, (2,), "float32")
    inputs = [f32(kit, (2,)) for _ in range(world())]
    inputs[rank()] = f32(kit, (3,))
    expect_error(
        kit,
        ValueError,
        lambda: compat.reduce_scatter(out, inputs),
        f"input_list[{rank()}]",
        ["expected shape (2,)", "got (3,)"],
        [out],
    )


@bad_case("input_list_dtype")
def _(kit: Any) -> None:
    out = sentinel(kit, (2,), "float32")
    inputs = [kit.tensor(np.ones(2), "int32") for _ in range(world())]
    expect_error(
        kit,
        TypeError,
        lambda: compat.reduce_scatter(out, inputs),
        "input_list[0]",
        ["expected dtype float32", "got int32"],
        [out],
    )


@bad_case("dim0_not_divisible", min_world=2)
def _(kit: Any) -> None:
    tensor = f32(kit, (2 * world() + 1, 2))
    expect_error(
        kit,
        ValueError,
        lambda: compat.reduce_scatter_tensor(tensor),
        "tensor",
        [f"divisible by the group size {world()}", f"got {2 * world() + 1}"],
        [tensor],
    )


@bad_case("out_shape")
def _(kit: Any) -> None:
    tensor = f32(kit, (2 * world(), 3))
    out = sentinel(kit, (3, 3), "float32")
    expect_error(
        kit,
        ValueError,
        lambda: compat.reduce_scatter_tensor(tensor, out=out),
        "out",
        ["expected shape (2, 3)", "got (3, 3)"],
        [tensor, out],
    )


@bad_case("out_dtype")
def _(kit: Any) -> None:
    tensor = f32(kit, (2 * world(), 3))
    out = sentinel(kit, (2, 3), "int32")
    expect_error(
        kit,
        TypeError,
        lambda: compat.reduce_scatter_tensor(tensor, out=out),
        "out",
        ["expected dtype float32", "got int32"],
        [tensor, out],
    )


@bad_case("split_sizes_sum")
def _(kit: Any) -> None:
    tensor = f32(kit, (4, 2))
    sizes = [5] + [0] * (world() - 1)
    expect_error(
        kit,
        ValueError,
        lambda: compat.reduce_scatter_tensor(tensor, input_split_sizes=sizes),
        "input_split_sizes",
        ["summing to 4", f"got {sizes}"],
        [tensor],
    )


@bad_case("split_sizes_length")
def _(kit: Any) -> None:
    tensor = f32(kit, (4, 2))
    sizes = [1] * (world() + 1)
    expect_error(
        kit,
        ValueError,
        lambda: compat.reduce_scatter_tensor(tensor, input_split_sizes=sizes),
        "input_split_sizes",
        [f"expected {world()} sizes", f"got {world() + 1}"],
        [tensor],
    )


@bad_case("output_split_sizes_own_entry")
def _(kit: Any) -> None:
    tensor = f32(kit, (2, 2))
    sizes = [3] * world()
    expect_error(
        kit,
        ValueError,
        lambda: compat.all_gather_into_tensor(tensor, output_split_sizes=sizes),
        "output_split_sizes",
        ["dim 0 of tensor (2)", f"got {sizes}"],
        [tensor],
    )


@bad_case("output_split_sizes_against_out")
def _(kit: Any) -> None:
    """The split sizes must add up to out's dim 0 (their sum was once checked against itself)."""
    tensor = f32(kit, (2, 2))
    sizes = [2] * world()
    out = sentinel(kit, (2 * world() + 1, 2), "float32")
    expect_error(
        kit,
        ValueError,
        lambda: compat.all_gather_into_tensor(tensor, out=out, output_split_sizes=sizes),
        "out",
        [f"expected shape ({2 * world()}, 2)", f"got ({2 * world() + 1}, 2)"],
        [tensor, out],
    )


@bad_case("output_split_sizes_negative")
def _(kit: Any) -> None:
    tensor = f32(kit, (2, 2))
    sizes = [2] * (world() - 1) + [-1]
    expect_error(
        kit,
        ValueError,
        lambda: compat.all_gather_into_tensor(tensor, output_split_sizes=sizes),
        "output_split_sizes",
        ["expected sizes >= 0", f"got {sizes}"],
        [tensor],
    )


@bad_case("non_tensor")
def _(kit: Any) -> None:
    expect_error(
        kit,
        TypeError,
        lambda: compat.all_reduce([1.0, 2.0]),
        "tensor",
        [f"expected a {kit.framework} tensor", "got list [1.0, 2.0]"],
        [],
    )


@bad_case("unknown_op")
def _(kit: Any) -> None:
    tensor = f32(kit, (2,))
    expect_error(
        kit,
        ValueError,
        lambda: compat.all_reduce(tensor, op="bogus"),
        "op",
        ["expected a compat.ReduceOp", "'sum'", "got 'bogus'"],
        [tensor],
    )


@bad_case("avg_on_integers")
def _(kit: Any) -> None:
    tensor = kit.tensor(np.ones(2), "int32")
    expect_error(
        kit,
        compat.UnsupportedError,
        lambda: compat.all_reduce(tensor, op="avg"),
        "op",
        ["AVG needs a floating dtype", "got dtype int32"],
        [tensor],
    )


@bad_case("bitwise_on_float")
def bitwise_on_float(kit: Any) -> None:
    """torch's Gloo raises 'Cannot use ReduceOp.BAND with non-integral dtype' (and on some
    releases its next collective fails too); compat refuses before any communication."""
    tensor, out = f32(kit, (2 * world(),), 3.0), f32(kit, (2,), -7.0)
    for op, call in (
        ("BAND", lambda: compat.all_reduce(tensor, op="band")),
        ("BOR", lambda: compat.reduce_scatter_tensor(tensor, compat.ReduceOp.BOR, out=out)),
        ("BXOR", lambda: compat.all_reduce_coalesced([tensor, out], op="bxor")),
    ):
        expect_error(
            kit,
            compat.UnsupportedError,
            call,
            "op",
            [f"{op} (bitwise) needs an integer or bool dtype", "got dtype float32"],
            [tensor, out],
        )


def _unsupported_dtype() -> str | None:
    backend = tables.lookup("capabilities", compat.get_backend())
    known = tables.lookup("dtypes", "dtypes")
    missing = [
        name
        for name, entry in known.items()
        if compat.get_framework() in entry and name not in backend["dtypes"]
    ]
    return missing[0] if missing else None


@bad_case("dtype_unsupported_by_backend")
def _(kit: Any) -> None:
    dtype = _unsupported_dtype()
    if dtype is None:
        raise AssertionError(f"{compat.get_backend()} takes every dtype: register no such case")
    tensor = kit.tensor(np.ones(2), dtype)
    expect_error(
        kit,
        compat.UnsupportedError,
        lambda: compat.all_reduce(tensor),
        "tensor",
        [f"dtype {dtype} is not supported by the {compat.get_backend()} backend", "float32"],
        [tensor],
    )


@bad_case("src_out_of_range")
def _(kit: Any) -> None:
    tensor = f32(kit, (2,), rank())
    expect_error(
        kit,
        ValueError,
        lambda: compat.broadcast(tensor, src=world()),
        "src",
        [f"one of {list(range(world()))}", f"got {world()}"],
        [tensor],
    )


@bad_case("dst_out_of_range")
def _(kit: Any) -> None:
    tensor = f32(kit, (2,), rank())
    expect_error(
        kit,
        ValueError,
        lambda: compat.reduce(tensor, dst=-1),
        "dst",
        ["expected a global rank", "got -1"],
        [tensor],
    )


@bad_case("src_not_int")
def _(kit: Any) -> None:
    tensor = f32(kit, (2,), rank())
    expect_error(
        kit,
        TypeError,
        lambda: compat.broadcast(tensor, src="0"),
        "src",  # type: ignore[arg-type]
        ["expected an int", "got str '0'"],
        [tensor],
    )


@bad_case("async_op_not_bool")
def _(kit: Any) -> None:
    tensor = f32(kit, (2,), rank())
    expect_error(
        kit,
        TypeError,
        lambda: compat.all_reduce(tensor, async_op="yes"),
        "async_op",  # type: ignore[arg-type]
        ["expected a bool", "got str 'yes'"],
        [tensor],
    )


@bad_case("group_without_this_rank", min_world=3)
def _(kit: Any) -> None:
    group = subgroup()
    if rank() in group.ranks:
        return  # the members have nothing to call; the non-member checks below
    tensor = f32(kit, (2,), rank())
    expect_error(
        kit,
        ValueError,
        lambda: compat.all_reduce(tensor, group=group),
        "group",
        [f"this rank ({rank()}) is not a member", f"got one with ranks {list(group.ranks)}"],
        [tensor],
    )


@bad_case("group_not_a_group")
def _(kit: Any) -> None:
    tensor = f32(kit, (2,), rank())
    expect_error(
        kit,
        TypeError,
        lambda: compat.all_reduce(tensor, group=3.5),  # type: ignore[arg-type]
        "group",
        ["expected None, compat.WORLD, a compat.Group or", "got float 3.5"],
        [tensor],
    )


@bad_case("group_unknown_name")
def _(kit: Any) -> None:
    """A string is a group name on MindSpore (an unknown one is a ValueError), nothing on torch."""
    tensor = f32(kit, (2,), rank())
    error, words = (
        (ValueError, ["expected the name of a MindSpore group", "got 'world'"])
        if kit.framework == "mindspore"
        else (TypeError, ["a torch.distributed ProcessGroup", "got str 'world'"])
    )
    expect_error(kit, error, lambda: compat.all_reduce(tensor, group="world"), "group", words,
                 [tensor])  # fmt: skip


def _foreign_tensor(kit: Any) -> tuple[Any, list[str]]:
    """A tensor compat was not initialised for, and what its error names: the other framework's
    (kit.foreign_tensors: in one job per framework), or elsewhere a numpy array, the array a user
    of one framework can still pass by mistake (make test-versions' environments have only one)."""
    if foreign_tensors(kit):
        other = kit.other_framework
        return kit.other_framework_tensor(), [
            f"got a {other} tensor",
            f"chooses it with compat.init(framework='{other}') or COMPAT_FRAMEWORK={other}",
        ]
    return np.zeros(4, np.float32), ["got ndarray"]


@bad_case("other_framework_tensor")
def _(kit: Any) -> None:
    other, named = _foreign_tensor(kit)
    expect_error(
        kit,
        TypeError,
        lambda: compat.all_reduce(other),
        "tensor",
        [f"expected a {kit.framework} tensor", *named],
        [],
    )


@bad_case("scatter_list_on_non_src", min_world=2)
def _(kit: Any) -> None:
    if rank() == 0:
        return  # src would enter the collective; only the ranks that err call
    out = sentinel(kit, (2,), "float32")
    parts = [f32(kit, (2,)) for _ in range(world())]
    expect_error(
        kit,
        ValueError,
        lambda: compat.scatter(out, parts, src=0),
        "scatter_list",
        ["expected None on ranks other than src=0", f"on rank {rank()}"],
        [out],
    )


@bad_case("scatter_list_missing_on_src")
def _(kit: Any) -> None:
    if rank() != 0:
        return
    out = sentinel(kit, (2,), "float32")
    expect_error(
        kit,
        TypeError,
        lambda: compat.scatter(out, None, src=0),
        "scatter_list",
        [f"expected a list of {world()} tensors", "got NoneType None"],
        [out],
    )


@bad_case("gather_list_length")
def _(kit: Any) -> None:
    if rank() != 0:
        return
    tensor = f32(kit, (2,))
    outputs = [sentinel(kit, (2,), "float32") for _ in range(world() + 1)]
    expect_error(
        kit,
        ValueError,
        lambda: compat.gather(tensor, outputs, dst=0),
        "gather_list",
        [f"{world()} tensors", f"got {world() + 1}"],
        outputs,
    )


@bad_case("all_to_all_trailing_dims")
def _(kit: Any) -> None:
    output = sentinel(kit, (world(), 3), "float32")
    tensor = f32(kit, (world(), 2))
    expect_error(
        kit,
        ValueError,
        lambda: compat.all_to_all_single(output, tensor),
        "input",
        ["expected shape (*, 3)", f"got ({world()}, 2)"],
        [output, tensor],
    )


@bad_case("send_to_self", min_world=2)
def _(kit: Any) -> None:
    tensor = f32(kit, (2,))
    expect_error(
        kit,
        ValueError,
        lambda: compat.send(tensor, dst=rank()),
        "dst",
        [f"other than this rank ({rank()})", f"got {rank()}"],
        [tensor],
    )


@bad_case("new_group_ranks")
def _(kit: Any) -> None:
    expect_error(
        kit,
        ValueError,
        lambda: compat.new_group([0, world()]),
        "ranks",
        [f"in [0, {world()})", f"got [0, {world()}]"],
        [],
    )


@bad_case("zero_dim_tensor")
def _(kit: Any) -> None:
    tensor = kit.tensor(np.float32(1.0), "float32")
    expect_error(
        kit,
        ValueError,
        lambda: compat.reduce_scatter_tensor(tensor),
        "tensor",
        ["at least one dimension", "got a 0-d tensor"],
        [tensor],
    )


@bad_case("dim_not_an_int")
def _(kit: Any) -> None:
    """dim=False and dim=0.0 equal the default 0 but are not ints: the full check refuses them
    (the functional forms take a plain dim 0 without it)."""
    n = world()
    tensor = f32(kit, (2 * n, 3))
    out = sentinel(kit, (2, 3), "float32")
    gathered = sentinel(kit, (2 * n * n, 3), "float32")
    for value in (False, 0.0):
        expect_error(
            kit,
            TypeError,
            lambda value=value: compat.reduce_scatter_tensor(tensor, dim=value, out=out),
            "dim",
            ["expected an int", f"got {type(value).__name__} {value!r}"],
            [tensor, out],
        )
        expect_error(
            kit,
            TypeError,
            lambda value=value: compat.all_gather_into_tensor(tensor, dim=value, out=gathered),
            "dim",
            ["expected an int", f"got {type(value).__name__} {value!r}"],
            [tensor, gathered],
        )


# -- point to point: isend, irecv, P2POp, batch_isend_irecv --------------------------------------


@bad_case("isend_peer_outside_world", min_world=2)
def _(kit: Any) -> None:
    tensor = f32(kit, (2,))
    expect_error(
        kit,
        ValueError,
        lambda: compat.isend(tensor, world()),
        "dst",
        [f"one of {list(range(world()))}", f"got {world()}"],
        [tensor],
    )


@bad_case("irecv_from_self", min_world=2)
def _(kit: Any) -> None:
    tensor = sentinel(kit, (2,), "float32")
    expect_error(
        kit,
        ValueError,
        lambda: compat.irecv(tensor, rank()),
        "src",
        [f"other than this rank ({rank()})", f"got {rank()}"],
        [tensor],
    )


@bad_case("irecv_other_framework_tensor", min_world=2)
def _(kit: Any) -> None:
    expect_error(
        kit,
        TypeError,
        lambda: compat.irecv(_foreign_tensor(kit)[0], (rank() + 1) % world()),
        "tensor",
        [f"expected a {kit.framework} tensor"],
        [],
    )


@bad_case("p2pop_wrong_op", min_world=2)
def _(kit: Any) -> None:
    tensor = f32(kit, (2,))
    expect_error(
        kit,
        ValueError,
        lambda: compat.P2POp(compat.send, tensor, (rank() + 1) % world()),
        "op",
        ["expected compat.isend or compat.irecv", "got the function compat.p2p.send"],
        [tensor],
    )


@bad_case("batch_non_tensor", min_world=2)
def _(kit: Any) -> None:
    received = sentinel(kit, (2,), "float32")
    peer = (rank() + 1) % world()
    ops = [compat.P2POp(compat.irecv, received, peer), compat.P2POp(compat.isend, [1.0, 2.0], peer)]
    expect_error(
        kit,
        TypeError,
        lambda: compat.batch_isend_irecv(ops),
        "p2p_op_list[1].tensor",
        [f"expected a {kit.framework} tensor", "got list"],
        [received],
    )


@bad_case("batch_peer_outside_group", min_world=2)
def _(kit: Any) -> None:
    group = subgroup()
    if rank() not in group.ranks:
        return
    outside = 1 if world() > 2 else world()
    received = sentinel(kit, (2,), "float32")
    ops = [
        compat.P2POp(
            compat.isend, f32(kit, (2,)), group.ranks[-1 - group.ranks.index(rank())], group
        ),
        compat.P2POp(compat.irecv, received, outside, group),
    ]
    expect_error(
        kit,
        ValueError,
        lambda: compat.batch_isend_irecv(ops),
        "p2p_op_list[1].peer",
        [f"one of {list(group.ranks)}", f"got {outside}"],
        [received],
    )


@bad_case("batch_mixed_groups", min_world=2)
def _(kit: Any) -> None:
    group = subgroup()
    if rank() not in group.ranks:
        return
    peer = group.ranks[-1 - group.ranks.index(rank())]
    received = sentinel(kit, (2,), "float32")
    ops = [
        compat.P2POp(compat.isend, f32(kit, (2,)), peer),
        compat.P2POp(compat.irecv, received, peer, group),
    ]
    expect_error(
        kit,
        ValueError,
        lambda: compat.batch_isend_irecv(ops),
        "p2p_op_list[1].group",
        ["every op of a batch uses one group"],
        [received],
    )


@bad_case("batch_empty_list")
def _(kit: Any) -> None:
    expect_error(
        kit,
        ValueError,
        lambda: compat.batch_isend_irecv([]),
        "p2p_op_list",
        ["non-empty list", "got list []"],
        [],
    )


@bad_case("p2p_peer_and_tag", min_world=2)
def _(kit: Any) -> None:
    """torch 2.13's send/recv/isend/irecv parameters: dst or group_dst (src or group_src),
    exactly one; tag an int >= 0. Checked before any communication, on every rank."""
    tensor, received = f32(kit, (2,)), sentinel(kit, (2,), "float32")
    peer = (rank() + 1) % world()
    cases: list[tuple[Callable[[], object], type[BaseException], str, list[str]]] = [
        (lambda: compat.send(tensor, peer, tag=-1), ValueError, "tag", ["0 to", "got -1"]),
        (lambda: compat.isend(tensor, peer, tag="a"), TypeError, "tag", ["an int", "got str"]),
        (lambda: compat.irecv(received, peer, tag=1.0), TypeError, "tag", ["got float 1.0"]),
        (lambda: compat.recv(received, peer, tag=True), TypeError, "tag", ["got bool True"]),
        (lambda: compat.isend(tensor, peer, tag=2**31), ValueError, "tag", [f"got {2**31}"]),
        # Values that equal a plain call's (a peer, tag 0) but are not ints: the full checks.
        (lambda: compat.isend(tensor, float(peer)), TypeError, "dst", [f"got float {peer}.0"]),
        (lambda: compat.irecv(received, peer, tag=False), TypeError, "tag", ["got bool False"]),
        (lambda: compat.isend(tensor, peer, tag=0.0), TypeError, "tag", ["got float 0.0"]),
        (
            lambda: compat.send(tensor, peer, group_dst=peer),
            ValueError,
            "dst",
            ["not both", f"dst={peer}", f"group_dst={peer}"],
        ),
        (lambda: compat.isend(tensor), ValueError, "dst", ["got neither"]),
        (
            lambda: compat.irecv(received, peer, None, 0, peer),
            ValueError,
            "src",
            ["not both"],
        ),
        (lambda: compat.recv(received), ValueError, "src", ["got neither", "any source"]),
        (lambda: compat.irecv(received, tag=-1), ValueError, "src", ["got neither"]),
        (
            lambda: compat.isend(tensor, group_dst=world()),
            ValueError,
            "group_dst",
            [f"0 to {world() - 1}", f"got {world()}"],
        ),
        (
            lambda: compat.recv(received, group_src=rank()),
            ValueError,
            "group_src",
            ["other than this rank", f"got {rank()}"],
        ),
        (
            lambda: compat.batch_isend_irecv(
                [
                    compat.P2POp(compat.irecv, received, group_peer=peer),
                    compat.P2POp(compat.isend, tensor, peer, tag=-2),
                ]
            ),
            ValueError,
            "p2p_op_list[1].tag",
            ["got -2"],
        ),
        (
            lambda: compat.batch_isend_irecv(
                [compat.P2POp(compat.irecv, received, peer, None, 0, 0)]
            ),
            ValueError,
            "p2p_op_list[0].peer",
            ["not both"],
        ),
    ]
    if kit.framework == "mindspore":
        # MindSpore's tag is a reserved parameter: messages match by order alone.
        for call in (
            lambda: compat.send(tensor, peer, tag=1),
            lambda: compat.recv(received, peer, tag=1),
            lambda: compat.isend(tensor, peer, None, 3),
            lambda: compat.irecv(received, src=peer, tag=1),
            lambda: compat.irecv(f32(kit, (0,)), src=peer, tag=1),
        ):
            cases.append((call, compat.UnsupportedError, "tag", ["expected 0 on mindspore"]))
        cases.append(
            (
                lambda: compat.batch_isend_irecv([compat.P2POp(compat.isend, tensor, peer, tag=1)]),
                compat.UnsupportedError,
                "p2p_op_list[0].tag",
                ["reserved parameter", "got 1"],
            )
        )
    for call, error, param, fragments in cases:
        expect_error(kit, error, call, param, fragments, [tensor, received])


@bad_case("barrier_device_ids")
def _(kit: Any) -> None:
    """barrier's device_ids is checked before any communication, on both frameworks."""
    for bad, error, param, fragments in (
        ("0", TypeError, "device_ids", ["a list of device indices", "got str '0'"]),
        ((0,), TypeError, "device_ids", ["a list of device indices", "got tuple"]),
        ([], ValueError, "device_ids", ["non-empty list", "got []"]),
        ([0, -1], ValueError, "device_ids", [">= 0", "got [0, -1]"]),
        ([1.0], TypeError, "device_ids[0]", ["expected an int", "got float 1.0"]),
    ):
        call = partial(compat.barrier, device_ids=bad)
        expect_error(kit, error, call, param, fragments, [])
    expect_error(
        kit,
        TypeError,
        lambda: compat.barrier(async_op=1),
        "async_op",
        ["expected a bool", "got int 1"],
        [],
    )


def _caller() -> bool:
    """The one rank that makes a bad call while its peers go straight to the follow-up
    collective: an error raised after any communication would hang it or mismatch theirs."""
    return rank() == world() - 1


@bad_case("all_gather_into")
def _(kit: Any) -> None:
    """torch's all_gather_into_tensor form: its parameter names in the messages."""
    n, tensor = world(), f32(kit, (2, 3), 5.0)
    output = sentinel(kit, (2 * n, 3), "float32")
    wrong_shape = sentinel(kit, (2 * n + 1, 3), "float32")
    wrong_dtype = sentinel(kit, (2 * n, 3), "int32")
    if not _caller():
        return
    tensor_words = [f"expected a {kit.framework} tensor"]
    for error, call, param, fragments, buffers in (
        (ValueError, lambda: compat.all_gather_into(wrong_shape, tensor), "output_tensor",
         [f"expected shape ({2 * n}, 3)", "every rank's input_tensor concatenated on dim 0",
          f"got ({2 * n + 1}, 3)"], [wrong_shape, tensor]),
        (TypeError, lambda: compat.all_gather_into(wrong_dtype, tensor, async_op=True),
         "output_tensor", ["expected dtype float32", "got int32"], [wrong_dtype, tensor]),
        (TypeError, lambda: compat.all_gather_into(np.zeros((2 * n, 3), np.float32), tensor),
         "output_tensor", [*tensor_words, "got ndarray"], [tensor]),
        (TypeError, lambda: compat.all_gather_into(output, None), "input_tensor",
         [*tensor_words, "got NoneType None"], [output]),
        (TypeError, lambda: compat.all_gather_into(output_tensor=output, input_tensor=[tensor]),
         "input_tensor", [*tensor_words, "got list"], [output, tensor]),
    ):  # fmt: skip
        expect_error(kit, error, call, param, fragments, buffers)


@bad_case("reduce_scatter_into")
def _(kit: Any) -> None:
    """torch's reduce_scatter_tensor form: its parameter names in the messages."""
    n, tensor = world(), f32(kit, (2 * world(), 3), 5.0)
    output = sentinel(kit, (2, 3), "float32")
    wrong_shape = sentinel(kit, (3, 3), "float32")
    wrong_dtype = sentinel(kit, (2, 3), "int64")
    uneven = f32(kit, (2 * n + 1, 3))
    if not _caller():
        return
    tensor_words = [f"expected a {kit.framework} tensor"]
    cases = [
        (ValueError, lambda: compat.reduce_scatter_into(wrong_shape, tensor), "output",
         ["expected shape (2, 3)", "this rank's part of the result", "got (3, 3)"],
         [wrong_shape, tensor]),
        (TypeError, lambda: compat.reduce_scatter_into(wrong_dtype, tensor, async_op=True),
         "output", ["expected dtype float32", "got int64"], [wrong_dtype, tensor]),
        (TypeError, lambda: compat.reduce_scatter_into(np.zeros((2, 3), np.float32), tensor),
         "output", [*tensor_words, "got ndarray"], [tensor]),
        (TypeError, lambda: compat.reduce_scatter_into(output, None), "input",
         [*tensor_words, "got NoneType None"], [output]),
        (ValueError, lambda: compat.reduce_scatter_into(output=output, input=tensor, op="bogus"),
         "op", ["got 'bogus'"], [output, tensor]),
    ]  # fmt: skip
    if n > 1:
        cases.append(
            (ValueError, lambda: compat.reduce_scatter_into(output, uneven), "input",
             [f"divisible by the group size {n}", f"got {2 * n + 1}"], [output, uneven])
        )  # fmt: skip
    for error, call, param, fragments, buffers in cases:
        expect_error(kit, error, call, param, fragments, buffers)


@bad_case("group_as_ranks")
def _(kit: Any) -> None:
    """funcol's group=[ranks]: unknown ranks (no group made with them) and non-int entries,
    for the collectives and compat.autograd alike."""
    n, tensor = world(), f32(kit, (2,), rank())
    if not _caller():
        return
    for function in (compat.all_reduce, compat.autograd.all_reduce):
        for group, error, param, fragments in (
            ([0, n], ValueError, "group",
             [f"no group has ranks [0, {n}]", f"compat.new_group([0, {n}]) on every rank first"]),
            ([n + 4], ValueError, "group", ["compat.new_group"]),
            ([0, "1"], TypeError, "group[1]", ["expected an int", "got str '1'"]),
            ((0.0,), TypeError, "group[0]", ["expected an int", "got float 0.0"]),
            ([True], TypeError, "group[0]", ["expected an int", "got bool True"]),
        ):  # fmt: skip
            call = partial(function, tensor, group=group)
            expect_error(kit, error, call, param, fragments, [tensor])


@bad_case("tensor_on_another_device", frameworks=("torch",))
def _(kit: Any) -> None:
    """A tensor the backend cannot communicate from where it is (here on torch's ``meta``
    device, as a CUDA tensor on the wrong GPU would be): a TypeError naming the parameter and
    both devices, for inputs, outputs and list elements, the CPU buffers untouched."""
    torch = kit.torch
    n, cpu = world(), f32(kit, (2 * world(),), rank())
    out = sentinel(kit, (2,), "float32")
    away = torch.empty(2 * n, device="meta")
    fragments = ["expected a tensor on cpu", "for gloo", "got one on meta"]
    expect_error(kit, TypeError, lambda: compat.all_reduce(away), "tensor", fragments, [])
    expect_error(
        kit, TypeError, lambda: compat.reduce_scatter_tensor(cpu, out=away[:2]), "out",
        fragments, [cpu],
    )  # fmt: skip
    parts = [f32(kit, (2,)) for _ in range(n)]
    parts[n - 1] = torch.empty(2, device="meta")
    expect_error(
        kit, TypeError, lambda: compat.reduce_scatter(out, parts), f"input_list[{n - 1}]",
        fragments, [out, *parts[: n - 1]],
    )  # fmt: skip


@bad_case("torch_order")
def _(kit: Any) -> None:
    """compat.reduce_scatter_tensor and all_gather_into_tensor take MindSpore's order (input
    first, the result returned); written torch's way, ``(output, input)``, each is one TypeError
    naming the function that takes torch's order, before any communication, both tensors
    untouched."""
    n = world()
    whole, part = f32(kit, (2 * n,), rank() + 1), sentinel(kit, (2,), "float32")
    for call, param, into in (
        (lambda: compat.reduce_scatter_tensor(part, whole), "op", "reduce_scatter_into"),
        (lambda: compat.all_gather_into_tensor(whole, part), "group", "all_gather_into"),
    ):
        function = into.replace("_into", "_into_tensor" if "gather" in into else "_tensor")
        expect_error(
            kit, TypeError, call, param,
            [f"got a {kit.framework} tensor", f"compat.{into}(output, input)",
             f"compat.{function}(input, out=output)"],
            [whole, part],
        )  # fmt: skip
