"""The algorithms of compat.algorithms on real ranks, each forced at small sizes: reduce_scatter's,
and all_gather's, all_reduce's and all_to_all's by buffered sends (MCCL) or isend/irecv pairs
(Gloo).

compat picks an algorithm by backend, dtype and size (``choose`` in capabilities.toml), so at the
small sizes of the other cases some would never run. Here each is called directly with the adapter,
across ops, dtypes, sync/async, uneven parts, views and a subgroup, and checked against numpy (the
same expectation the native collectives meet in cases.py); shared cases are also compared across
frameworks by the parity test. The size-dependent choice itself is checked against the table.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

import compat
from compat import algorithms
from compat.base import tables
from compat.base.types import ReduceOp
from compat.core import capabilities, state
from tests.ranks.cases import (
    DTYPES,
    SENTINEL,
    assert_close,
    members,
    rank,
    reduce_np,
    register,
    runs,
    sentinel,
    subgroup,
    uneven_sizes,
    values,
    wait_if,
    world,
)
from tests.ranks.layout_cases import Placed, sentinel_out

TORCH = ("torch",)
BOTH = ("torch", "mindspore")
MINDSPORE = ("mindspore",)

#: list-form algorithm -> (its tensor form, frameworks that can run it, dtypes it takes)
ALGORITHMS = {
    "all_to_all_reduce": ("all_to_all_reduce_tensor", TORCH, DTYPES),
    # MCCL's all_reduce moves no float64 (the table limits this choice to the dtypes it does).
    "all_reduce_slice": ("all_reduce_slice_tensor", BOTH, [d for d in DTYPES if d != "float64"]),
    "scatter_reduce": ("scatter_reduce_tensor", BOTH, DTYPES),
    # Sends before receives: only where a send completes without its receive (MCCL).
    "buffered_send_reduce_scatter": ("buffered_send_reduce_scatter_tensor", MINDSPORE, DTYPES),
    # Ranks on one host (a group of 2 ranks or more: compat.transport.shared_memory).
    "shared_memory_reduce_scatter": ("shared_memory_reduce_scatter_tensor", BOTH, DTYPES),
}


def _min_world(algorithm: str) -> int:
    """A group of one rank has no shared-memory window (compat.transport.shared_memory): nothing to
    share."""
    return 2 if algorithm.startswith("shared_memory") else 1


def combos(dtypes: list[str]) -> list[tuple[str, str]]:
    """Every dtype with sum; every op with float32; every op but AVG with an integer dtype."""
    found = [("sum", dtype) for dtype in dtypes]
    found += [(op, "float32") for op in ("prod", "min", "max", "avg")]
    found += [(op, "int64") for op in ("prod", "min", "max")]
    return found


def adapter() -> Any:
    return state.current().adapter


#: The backend reduction each algorithm hands its ReduceOp to. Where the backend lacks an op at
#: this framework release (an emulate rule of capabilities.toml: Gloo before torch 2.8 has no
#: AVG), compat never runs the algorithm with it (the rule's emulation runs instead, checked by
#: the case versions-reduce-ops), so the algorithm's case leaves that op out.
HANDS_OP_TO = {
    "all_reduce_slice": "all_reduce",
    "all_reduce_slice_tensor": "all_reduce",
    "reduce_keep_input": "reduce",
    "padded_reduce_scatter": "reduce_scatter_tensor",
}


def backend_ops(algorithm: str, combos_: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``combos_`` without the ops the backend's reduction that ``algorithm`` calls lacks here."""
    collective = HANDS_OP_TO.get(algorithm)
    if collective is None:
        return combos_
    lacked = capabilities.lacked_ops(state.current().capability_key, collective)
    return [(op, dtype) for op, dtype in combos_ if op not in lacked]


def finish(pending: Any, async_op: bool) -> None:
    """An algorithm returns what an adapter method does: a pending handle (async) or None."""
    if async_op:
        assert pending is not None, "async_op=True must give something to wait on"
        pending.wait()
    else:
        assert pending is None, f"expected None for a synchronous call, got {pending!r}"


def case_list_form(kit: Any, algorithm: str, async_op: bool) -> None:
    """Separate input tensors (not parts of one buffer), every op/dtype combination."""
    run = getattr(algorithms, algorithm)
    n, me = world(), rank()
    for op, dtype in backend_ops(algorithm, combos(ALGORITHMS[algorithm][2])):
        seed = f"algo-list-{algorithm}-{op}-{dtype}"
        inputs = [kit.tensor(values(seed, me * 100 + i, (2, 3), op), dtype) for i in range(n)]
        output = sentinel(kit, (2, 3), dtype)
        finish(run(adapter(), output, inputs, ReduceOp(op), None, async_op), async_op)
        expected = reduce_np([values(seed, r * 100 + me, (2, 3), op) for r in range(n)], op)
        assert_close(kit.numpy(output), expected, dtype, f"{algorithm} {op} {dtype}")


def case_tensor_form(kit: Any, algorithm: str, async_op: bool) -> None:
    """One tensor split on dim 0; the input is left unchanged."""
    tensor_form = ALGORITHMS[algorithm][0]
    run = getattr(algorithms, tensor_form)
    n, me = world(), rank()
    for op, dtype in backend_ops(tensor_form, combos(ALGORITHMS[algorithm][2])):
        seed = f"algo-tensor-{algorithm}-{op}-{dtype}"
        tensor = kit.tensor(values(seed, me, (2 * n, 3), op), dtype)
        before = kit.numpy(tensor)
        output = sentinel(kit, (2, 3), dtype)
        finish(run(adapter(), output, tensor, ReduceOp(op), None, async_op), async_op)
        full = reduce_np([values(seed, r, (2 * n, 3), op) for r in range(n)], op)
        assert_close(kit.numpy(output), full[2 * me : 2 * me + 2], dtype, f"{tensor_form} {op}")
        assert_close(kit.numpy(tensor), before, dtype, f"{tensor_form}: input changed")


def case_uneven(kit: Any, algorithm: str, async_op: bool) -> None:
    """Uneven parts, both as views of one tensor and as separate tensors; the output a view."""
    run = getattr(algorithms, algorithm)
    n, me = world(), rank()
    sizes = uneven_sizes()
    seed = f"algo-uneven-{algorithm}"
    for op in ("sum", "max"):
        whole = kit.tensor(values(seed + op, me, (sum(sizes), 2)), "float32")
        separate = [
            kit.tensor(values(seed + op, me * 100 + i, (s, 2)), "float32")
            for i, s in enumerate(sizes)
        ]
        joined = adapter().split(whole, sizes)
        for label, inputs in (("views of one tensor", joined), ("separate tensors", separate)):
            # The output is rows 1.. of a bigger tensor: results must be written through views.
            host = sentinel(kit, (sizes[me] + 1, 2), "float32")
            output = adapter().split(host, [1, sizes[me]])[1]
            finish(run(adapter(), output, inputs, ReduceOp(op), None, async_op), async_op)
            if label == "views of one tensor":
                starts = [sum(sizes[:i]) for i in range(n)]
                parts = [
                    values(seed + op, r, (sum(sizes), 2))[starts[me] : starts[me] + sizes[me]]
                    for r in range(n)
                ]
            else:
                parts = [values(seed + op, r * 100 + me, (sizes[me], 2)) for r in range(n)]
            result = kit.numpy(host)
            assert_close(result[1:], reduce_np(parts, op), "float32", f"{algorithm} {label}")
            assert_close(result[:1], np.full((1, 2), -7.0), "float32", "row 0 must stay")


def case_subgroup(kit: Any, algorithm: str) -> None:
    group = subgroup()
    ranks = members(group)
    if rank() not in ranks:
        return
    run = getattr(algorithms, ALGORITHMS[algorithm][0])
    n, me = len(ranks), ranks.index(rank())
    seed = f"algo-group-{algorithm}"
    tensor = kit.tensor(values(seed, rank(), (2 * n, 3)), "float32")
    output = sentinel(kit, (2, 3), "float32")
    finish(run(adapter(), output, tensor, ReduceOp.SUM, group.handle, False), False)
    full = reduce_np([values(seed, r, (2 * n, 3)) for r in ranks], "sum")
    assert_close(kit.numpy(output), full[2 * me : 2 * me + 2], "float32", f"{algorithm} group")


def case_concurrent(kit: Any, algorithm: str) -> None:
    """Two async calls of the same shape outstanding at once, then a third after them: the
    scratch buffers they receive into are never shared or stale."""
    run = getattr(algorithms, ALGORITHMS[algorithm][0])
    n, me = world(), rank()
    seeds = [f"algo-concurrent-{algorithm}-{i}" for i in range(3)]
    tensors = [kit.tensor(values(seed, me, (2 * n, 3)), "float32") for seed in seeds]
    outputs = [sentinel(kit, (2, 3), "float32") for _ in seeds]
    first = run(adapter(), outputs[0], tensors[0], ReduceOp.SUM, None, True)
    second = run(adapter(), outputs[1], tensors[1], ReduceOp.SUM, None, True)
    second.wait()
    first.wait()
    finish(run(adapter(), outputs[2], tensors[2], ReduceOp.SUM, None, False), False)
    for seed, output in zip(seeds, outputs, strict=True):
        full = reduce_np([values(seed, r, (2 * n, 3)) for r in range(n)], "sum")
        assert_close(kit.numpy(output), full[2 * me : 2 * me + 2], "float32", seed)


def case_choice(kit: Any) -> None:
    """The runtime picks what capabilities.toml's ``choose`` says, by dtype and size, and the
    public call runs it correctly at a size where a size-dependent algorithm is chosen."""
    runtime = state.current()
    # the backend's entry at this framework release (capabilities.toml before)
    ops = capabilities.capability_entry(runtime.capability_key)["ops"]
    for collective in [name for name, entry in ops.items() if "choose" in entry]:
        entry = ops[collective]
        base = entry.get("algorithm", "native") if entry["impl"] == "emulated" else "native"
        for dtype in ("float32", "float64"):
            # Without a group its size is unknown: no choice bounded by it applies
            # (case_choice_by_group_size checks those on the world).
            choices = [
                c
                for c in entry.get("choose", [])
                if dtype in c.get("dtypes", [dtype]) and not {"min_ranks", "max_ranks"} & set(c)
            ]
            for size in sorted({0, 1, *(c["min_bytes"] for c in choices), 2**30}):
                eligible = [c for c in choices if c["min_bytes"] <= size]
                plain = [c for c in eligible if not c.get("one_host")]
                expected = base
                if plain:
                    expected = max(plain, key=lambda c: c["min_bytes"])["algorithm"]
                actual = runtime.algorithm(collective, dtype, size)
                assert actual == expected, (collective, dtype, size, actual, expected)
                # A group on one host: a one_host choice that applies wins over the others.
                one_host = [c for c in eligible if c.get("one_host")]
                if one_host:
                    expected = max(one_host, key=lambda c: c["min_bytes"])["algorithm"]
                actual = runtime.algorithm(collective, dtype, size, one_host=True)
                assert actual == expected, (collective, dtype, size, "one host", actual)
    # The largest threshold, through compat.reduce_scatter_tensor and compat.reduce_scatter.
    thresholds = [c["min_bytes"] for c in ops["reduce_scatter_tensor"].get("choose", [])]
    n, me = world(), rank()
    rows = max(2, -(-max(thresholds, default=0) // (4 * 4 * n)))  # float32 rows of 4 elements
    seed = "algo-choice"
    mine = values(seed, me, (rows * n, 4))
    full = reduce_np([values(seed, r, (rows * n, 4)) for r in range(n)], "sum")
    result = compat.reduce_scatter_tensor(kit.tensor(mine, "float32"))
    np.testing.assert_allclose(kit.numpy(result), full[rows * me : rows * (me + 1)])
    output = sentinel(kit, (rows, 4), "float32")
    parts = adapter().split(kit.tensor(mine, "float32"), [rows] * n)
    wait_if(compat.reduce_scatter(output, parts, async_op=True), True)
    np.testing.assert_allclose(kit.numpy(output), full[rows * me : rows * (me + 1)])


def case_choice_by_group_size(kit: Any) -> None:
    """What the runtime runs on the world, at each size where the table's choice can change,
    is the table's choice for the world's size, with the world's window or without it (the
    backend's own transport): a choice bounded by the group's size (min_ranks, max_ranks)
    applies only within its bounds, on one host and off it."""
    runtime = state.current()
    key = runtime.capability_key
    like = kit.tensor(np.zeros(4), "float32")
    ops = tables.lookup("capabilities", key, "ops")
    for collective in ops:
        if collective in capabilities.POINT_TO_POINT or "barrier" in collective:
            continue
        one_host = runtime.through_shared_memory(collective, like, None)
        choices = ops[collective].get("choose", [])
        for size in sorted({0, *(c["min_bytes"] for c in choices), 2**30}):
            expected = capabilities.resolve(key, collective, "float32", size, one_host, world())
            run = runtime.implementation(collective, like, size, None, "float32")
            assert runs(run, expected), (collective, size, one_host, run, expected)


def case_choice_gather(kit: Any) -> None:
    """compat.all_gather_into_tensor and compat.all_gather (async) at the input size from which
    the capability table chooses its last algorithm for them, checked against numpy (not
    recorded for the parity test: the sizes differ between the frameworks' tables)."""
    runtime = state.current()
    ops = tables.lookup("capabilities", runtime.capability_key, "ops")
    n, me = world(), rank()
    for collective in ("all_gather_into_tensor", "all_gather"):
        thresholds = [c["min_bytes"] for c in ops[collective].get("choose", [])]
        rows = max(2, -(-max(thresholds, default=0) // 16))  # float32 rows of 4 elements
        seed = f"algo-choice-{collective}"
        mine = kit.tensor(values(seed, me, (rows, 4)), "float32")
        expected = [values(seed, r, (rows, 4)) for r in range(n)]
        chosen = runtime.algorithm(collective, "float32", rows * 16)
        if collective == "all_gather_into_tensor":
            result = compat.all_gather_into_tensor(mine)
            np.testing.assert_array_equal(kit.numpy(result), np.concatenate(expected), chosen)
        else:
            outputs = [sentinel(kit, (rows, 4), "float32") for _ in range(n)]
            wait_if(compat.all_gather(outputs, mine, async_op=True), True)
            for j, out in enumerate(outputs):
                np.testing.assert_array_equal(kit.numpy(out), expected[j], f"{chosen} from {j}")


def case_join(kit: Any) -> None:
    """Equal dim-0 views of one tensor join into one tensor over the same memory (no copy), so
    the list form of reduce_scatter runs as the tensor form; parts out of order do not join."""
    n = world()
    data = values("join", rank(), (2 * n, 3))
    whole = kit.tensor(data, "float32")
    parts = adapter().split(whole, [2] * n)
    joined = adapter().joined(parts)
    assert joined is not None, "equal views of one tensor, in order, must join"
    assert_close(kit.numpy(joined), data, "float32", "joined")
    marker = kit.tensor(np.full((1, 3), 5.0, dtype=np.float32), "float32")
    adapter().copy_(adapter().narrow(joined, 2 * n - 1, 1), marker)
    assert_close(kit.numpy(whole)[-1:], np.full((1, 3), 5.0), "float32", "shared memory")
    if n > 1:
        assert adapter().joined(parts[::-1]) is None, "parts out of order must not join"


def case_views_keep_their_memory(kit: Any) -> None:
    """A tensor the adapter makes over another's memory (parts, joined, flat_view) keeps that
    tensor alive, so a part of a staged copy cannot outlive the copy's memory: the copy, dropped
    by its caller, lives while a part does (torch's views hold their base themselves)."""
    import gc
    import weakref

    n = max(world(), 2)
    ad = adapter()
    data = values("keep-memory", rank(), (2 * n, 3))
    makers = {
        "parts": lambda t: ad.parts(t, [2] * n),
        "joined": lambda t: [ad.joined(ad.split(t, [2] * n))],
        "flat_view": lambda t: [ad.flat_view(t)],
    }
    for name, make in makers.items():
        staged = ad.clone(kit.tensor(data, "float32"))
        alive = weakref.ref(staged)
        made = [item for item in make(staged) if item is not None]
        del staged
        gc.collect()
        if not made:  # the adapter made nothing over the memory (off CPU): nothing to hold
            continue
        assert alive() is not None, f"{name}: the tensor under it was freed while it lives"
        together = np.concatenate([kit.numpy(item).reshape(-1) for item in made])
        assert_close(together, data.reshape(-1), "float32", name)
        del made
        gc.collect()


def case_dense_dtype(kit: Any) -> None:
    """The adapter's dense_dtype (point to point's fast check, answered with fewer reads) and
    dense_facts (the collectives' common case: dtype and shape in one call) agree with what they
    stand for, on_home, is_dense, numel, dtype and shape, on every layout."""
    from compat.base.adapter import Adapter

    base = kit.tensor(values("dense-dtype", rank(), (4, 6)), "float32")
    ad = adapter()
    samples = {
        "dense": base,
        "row": ad.narrow(base, 1, 1),
        "rows at an offset": ad.narrow(base, 2, 2),
        "first rows": ad.narrow(base, 0, 2),
        "transposed": ad.movedim(base, 1, 0),
        "empty": ad.narrow(base, 0, 0),
        "int32": kit.tensor(np.arange(6), "int32"),
        "one element": kit.tensor(np.ones(1), "float32"),
    }
    if kit.framework == "torch":  # a tensor off this rank's device
        import torch

        samples["on the meta device"] = torch.empty(4, device="meta")
        # Emptiness read from the shape (a 0 in it), not from numel()
        samples["empty columns"] = torch.empty(4, 0)
        samples["0-d"] = torch.tensor(2.0)
    for name, tensor in samples.items():
        found = ad.dense_dtype(tensor)
        expected = Adapter.dense_dtype(ad, tensor)
        assert found == expected, (
            f"{name}: dense_dtype {found!r}, the checks it stands for {expected!r}"
        )
        found_facts, expected_facts = ad.dense_facts(tensor), Adapter.dense_facts(ad, tensor)
        assert found_facts == expected_facts, (
            f"{name}: dense_facts {found_facts!r}, the checks it stands for {expected_facts!r}"
        )
    assert ad.dense_dtype(base) == "float32"
    assert ad.dense_dtype(samples["empty"]) is None
    assert ad.dense_facts(base) == ("float32", (4, 6))
    assert ad.dense_facts(samples["one element"]) == ("float32", (1,))
    assert ad.dense_facts(samples["transposed"]) is None
    assert ad.dense_facts(samples["empty"]) is None


class _TensorFormByTable:
    """The adapter, with reduce_scatter_tensor run as compat runs it on this backend.

    padded_reduce_scatter calls the adapter's native reduce_scatter_tensor (HCCL's kernel, where
    the table chooses it). MCCL has no such kernel ('DistCommReduceScatterTensor unregistered'),
    so on MindSpore here its equal-part step runs what the capability table runs instead; the
    padding, the views and the copy out are the algorithm's own either way.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def reduce_scatter_tensor(
        self, output: Any, tensor: Any, op: ReduceOp, group: Any, async_op: bool
    ) -> Any:
        run = state.current().implementation("reduce_scatter_tensor", tensor)
        return run(output, tensor, op, group, async_op)


#: (op, dtype) pairs for the padded algorithm: every op, over float and integer dtypes.
PADDED_COMBOS = [
    ("sum", "float32"),
    ("sum", "int64"),
    ("avg", "float32"),
    ("prod", "float32"),
    ("min", "int32"),
    ("max", "float64"),
]


def case_padded_reduce_scatter(kit: Any, async_op: bool) -> None:
    """padded_reduce_scatter (HCCL's path for parts of different sizes) called directly: every
    op, parts of different sizes (one set with a part of size 0), as views of one tensor and as
    separate tensors; the output is a view inside a sentinel-filled tensor, which is checked
    whole, and the inputs are left unchanged."""
    native = adapter()
    padded_adapter = native if kit.framework == "torch" else _TensorFormByTable(native)
    n, me = world(), rank()
    for sizes in (uneven_sizes(), [(2 * i) % 5 for i in range(n)]):
        starts = [sum(sizes[:i]) for i in range(n)]
        for op, dtype in backend_ops("padded_reduce_scatter", PADDED_COMBOS):
            seed = f"padded-reduce-scatter-{sizes}-{op}-{dtype}"
            whole = kit.tensor(values(seed, me, (sum(sizes), 3), op), dtype)
            separate = [
                kit.tensor(values(seed, me * 100 + i, (s, 3), op), dtype)
                for i, s in enumerate(sizes)
            ]
            layouts = {"views of one tensor": native.split(whole, sizes), "separate": separate}
            for label, inputs in layouts.items():
                before = [kit.numpy(item) for item in inputs]
                # The result goes to rows 1..size of a bigger tensor; rows 0 and last must stay.
                host = sentinel(kit, (sizes[me] + 2, 3), dtype)
                output = native.split(host, [1, sizes[me], 1])[1]
                pending = algorithms.padded_reduce_scatter(
                    padded_adapter, output, inputs, ReduceOp(op), None, async_op
                )
                finish(pending, async_op)
                if label == "separate":
                    parts = [values(seed, r * 100 + me, (sizes[me], 3), op) for r in range(n)]
                else:
                    parts = [
                        values(seed, r, (sum(sizes), 3), op)[starts[me] : starts[me] + sizes[me]]
                        for r in range(n)
                    ]
                expected = np.full((sizes[me] + 2, 3), float(SENTINEL))
                expected[1 : 1 + sizes[me]] = reduce_np(parts, op)
                what = f"padded_reduce_scatter {sizes} {op} {dtype} {label}"
                assert_close(kit.numpy(host), expected, dtype, what)
                for item, old in zip(inputs, before, strict=True):
                    assert_close(kit.numpy(item), old, dtype, f"{what}: an input changed")


def case_uneven_dispatch(kit: Any) -> None:
    """compat.reduce_scatter and compat.reduce_scatter_tensor run parts of different sizes through
    the capability table's reduce_scatter_uneven entry (HCCL's padded path), and equal parts
    through reduce_scatter and reduce_scatter_tensor, never through it."""
    runtime = state.current()
    n, me = world(), rank()
    table_choice = runtime.implementation("reduce_scatter_uneven", kit.tensor([0.0], "float32"))
    calls: list[Any] = []

    def recording(*args: Any) -> Any:
        calls.append(args)
        return table_choice(*args)

    runtime.force("reduce_scatter_uneven", "float32", ("recording", recording))
    try:
        sizes = uneven_sizes()
        seed = "uneven-dispatch"
        mine = values(seed, me, (sum(sizes), 2))
        full = reduce_np([values(seed, r, (sum(sizes), 2)) for r in range(n)], "sum")
        start = sum(sizes[:me])
        expected = full[start : start + sizes[me]]
        cuts = [sum(sizes[: i + 1]) for i in range(n - 1)]
        inputs = [kit.tensor(part, "float32") for part in np.split(mine, cuts)]
        output = sentinel(kit, (sizes[me], 2), "float32")
        wait_if(compat.reduce_scatter(output, inputs), False)
        assert_close(kit.numpy(output), expected, "float32", "uneven list form")
        result = compat.reduce_scatter_tensor(kit.tensor(mine, "float32"), input_split_sizes=sizes)
        assert_close(kit.numpy(result), expected, "float32", "uneven tensor form")
        assert len(calls) == 2, f"uneven parts ran reduce_scatter_uneven {len(calls)} times, not 2"
        equal = [kit.tensor(values(seed, me * 100 + i, (2, 2)), "float32") for i in range(n)]
        output = sentinel(kit, (2, 2), "float32")
        wait_if(compat.reduce_scatter(output, equal), False)
        parts = [values(seed, r * 100 + me, (2, 2)) for r in range(n)]
        assert_close(kit.numpy(output), reduce_np(parts, "sum"), "float32", "equal list form")
        tensor = kit.tensor(values(seed + "-equal", me, (2 * n, 2)), "float32")
        result = compat.reduce_scatter_tensor(tensor, input_split_sizes=[2] * n)
        whole = reduce_np([values(seed + "-equal", r, (2 * n, 2)) for r in range(n)], "sum")
        assert_close(kit.numpy(result), whole[2 * me : 2 * me + 2], "float32", "equal splits")
        assert len(calls) == 2, "equal parts must not run reduce_scatter_uneven"
    finally:
        runtime.force("reduce_scatter_uneven", "float32", None)


def case_reduce_concurrent(kit: Any, algorithm: str) -> None:
    """A reduce algorithm's buffers come from the scratch pool (reduce_keep_input's copies on
    the other ranks, gather_reduce_to_dst's gathered tensors on the root): two async calls in
    flight, waited for in reverse order, then a synchronous one, each gives the root its
    reduction and leaves every other rank's tensor as it was (a buffer given back to the pool
    before its call completed would be reused by the next)."""
    run = getattr(algorithms, algorithm)
    n, me, dst = world(), rank(), world() - 1
    seeds = [f"{algorithm}-concurrent-{i}" for i in range(3)]
    mine = [values(seed, me, (3, 4)) for seed in seeds]
    tensors = [kit.tensor(values_, "float32") for values_ in mine]
    first = run(adapter(), tensors[0], dst, ReduceOp.SUM, None, True)
    second = run(adapter(), tensors[1], dst, ReduceOp.SUM, None, True)
    second.wait()
    first.wait()
    finish(run(adapter(), tensors[2], dst, ReduceOp.SUM, None, False), False)
    for seed, tensor, values_ in zip(seeds, tensors, mine, strict=True):
        if me == dst:
            expected = reduce_np([values(seed, r, (3, 4)) for r in range(n)], "sum")
            assert_close(kit.numpy(tensor), expected, "float32", seed)
        else:
            assert_close(kit.numpy(tensor), values_, "float32", f"{seed}: a non-root's tensor")


def _reduce_cases(
    kit: Any, algorithm: str, async_op: bool, group: Any, combos_: list[tuple[str, str]]
) -> None:
    """``algorithm`` (a reduce) to every root of ``group``, for ``combos_`` (op, dtype), on
    tensors in sentinel-filled bases (the public path gives the algorithms dense tensors: a
    whole base, and a contiguous view inside one): the root's holds the reduction, the others'
    are unchanged, and the bases are checked whole."""
    ranks = members(group)
    handle = None if group is None else group.handle
    run = getattr(algorithms, algorithm)
    for op, dtype in backend_ops(algorithm, combos_):
        for dst in ranks:
            for layout in ("dense", "interior"):
                for shape in ((5, 3), (1, 4)):
                    what = f"{algorithm} {op} {dtype} to {dst} {layout} {shape}"
                    key = f"algo-reduce-{op}-{dtype}-{shape}"
                    x = Placed(kit, _data(key, rank(), shape, dtype, op), dtype, layout)
                    finish(run(adapter(), x.view, dst, ReduceOp(op), handle, async_op), async_op)
                    if rank() == dst:
                        x.result(reduce_np([_data(key, r, shape, dtype, op) for r in ranks], op))
                    x.check(what)


def case_reduce(kit: Any, algorithm: str, async_op: bool) -> None:
    few = [("sum", "float32"), ("max", "int64")]
    _reduce_cases(kit, algorithm, async_op, None, few if async_op else combos(DTYPES))


def case_reduce_subgroup(kit: Any, algorithm: str) -> None:
    group = subgroup()
    if rank() in members(group):
        _reduce_cases(kit, algorithm, False, group, [("sum", "float32"), ("min", "int32")])


register("algorithm-join", case_join)
register("algorithm-dense-dtype", case_dense_dtype)
register("algorithm-views-keep-their-memory", case_views_keep_their_memory)
for _async in (False, True):
    register(
        f"algorithm[padded_reduce_scatter]{'-async' if _async else ''}",
        partial(case_padded_reduce_scatter, async_op=_async),
        min_world=2,
    )
register("reduce_scatter_uneven-dispatch", case_uneven_dispatch, min_world=2)


def _register(
    name: str, label: str, case: Callable[..., None], frameworks: tuple[str, ...], **kw: Any
) -> None:
    """Register ``case`` with ``kw`` as "algorithm[name]label", on ``frameworks``."""
    register(
        f"algorithm[{name}]{label}", partial(case, **kw), frameworks=frameworks,
        min_world=_min_world(name),
    )  # fmt: skip


def _register_sync_and_async(
    name: str, label: str, case: Callable[..., None], frameworks: tuple[str, ...], **kw: Any
) -> None:
    """:func:`_register` twice: with async_op False ("label"), and True ("label-async")."""
    for async_op in (False, True):
        suffix = "-async" if async_op else ""
        _register(name, label + suffix, case, frameworks, async_op=async_op, **kw)


for _algorithm, (_tensor_form, _frameworks, _dtypes) in ALGORITHMS.items():
    _register_sync_and_async(_algorithm, "", case_list_form, _frameworks, algorithm=_algorithm)
    # The tensor form's cases are named after it, and need the ranks its list form needs.
    for _async in (False, True):
        register(
            f"algorithm[{_tensor_form}]{'-async' if _async else ''}",
            partial(case_tensor_form, algorithm=_algorithm, async_op=_async),
            frameworks=_frameworks,
            min_world=_min_world(_algorithm),
        )
    _register_sync_and_async(_algorithm, "-uneven", case_uneven, _frameworks, algorithm=_algorithm)
    _register(_algorithm, "-subgroup", case_subgroup, _frameworks, algorithm=_algorithm)
    _register(_algorithm, "-concurrent", case_concurrent, _frameworks, algorithm=_algorithm)

# Gloo's choices for reduce across hosts (capabilities.toml, gloo.ops.reduce): its entry's own
# algorithm, and the gather below a size that falls as the ranks grow.
for _algorithm in ("reduce_keep_input", "gather_reduce_to_dst"):
    _register_sync_and_async(_algorithm, "", case_reduce, TORCH, algorithm=_algorithm)
    _register(_algorithm, "-subgroup", case_reduce_subgroup, TORCH, algorithm=_algorithm)
    _register(_algorithm, "-concurrent", case_reduce_concurrent, TORCH, algorithm=_algorithm)


# -- all_gather, all_reduce and all_to_all by buffered sends (MCCL) or isend/irecv pairs (Gloo) ---

#: all_gather algorithm (its tensor form adds "_into_tensor") -> frameworks that can run it.
#: Buffered sends only where a send completes without its receive (MCCL; they would deadlock on
#: Gloo); isend/irecv pairs posted at once only where an irecv does not block the queue (Gloo).
GATHER_ALGORITHMS = {
    "buffered_send_all_gather": MINDSPORE,
    "pairwise_all_gather": TORCH,
    "shared_memory_all_gather": BOTH,
}
#: all_reduce algorithms, and all_to_all_single's with its list form, -> frameworks.
ALL_REDUCE_ALGORITHMS = {
    "buffered_send_all_reduce": MINDSPORE,
    "pairwise_all_gather_reduce": TORCH,
    "shared_memory_all_reduce": BOTH,
    "shared_memory_all_reduce_in_shares": BOTH,
}
A2A_ALGORITHMS = {
    ("buffered_send_all_to_all", "buffered_send_all_to_all_list"): MINDSPORE,
    ("shared_memory_all_to_all", "shared_memory_all_to_all_list"): BOTH,
    ("shared_memory_p2p_all_to_all", "shared_memory_p2p_all_to_all_list"): BOTH,
}

#: The views the algorithms' tensors are given as (tests/ranks/layout_cases.py): the whole base
#: tensor, sentinel-filled around the view, is checked afterwards.
VIEW_LAYOUTS = ("dense", "interior", "strided", "column")


def _data(seed: str, who: int, shape: tuple[int, ...], dtype: str, op: str = "sum") -> np.ndarray:
    """A rank's values; non-negative for uint8."""
    data = values(seed, who, shape, op)
    return np.abs(data) if dtype == "uint8" else data


#: The asynchronous and subgroup runs take a few dtypes and layouts (a MindSpore job pays a few
#: milliseconds per message).
FEW_DTYPES, FEW_LAYOUTS = ["float32", "float64"], ("dense", "column")


def _both_forms(
    kit: Any,
    algorithm: str,
    async_op: bool,
    group: Any,
    seed: str,
    dtypes: list[str],
    layouts: tuple[str, ...],
) -> None:
    """The list form and the tensor form, for ``dtypes`` and view ``layouts``, on ``group``."""
    ranks = members(group)
    n, me = len(ranks), ranks.index(rank())
    handle = None if group is None else group.handle
    run, tensor_form = (
        getattr(algorithms, algorithm),
        getattr(algorithms, algorithm + "_into_tensor"),
    )
    for dtype in dtypes:
        for layout in layouts:
            what = f"{algorithm} {dtype} {layout}"
            mine = Placed(kit, _data(seed + dtype, me, (2, 3), dtype), dtype, layout)
            outputs = [sentinel_out(kit, (2, 3), dtype, layout) for _ in range(n)]
            pending = run(adapter(), [out.view for out in outputs], mine.view, handle, async_op)
            finish(pending, async_op)
            for j, out in enumerate(outputs):
                out.result(_data(seed + dtype, j, (2, 3), dtype))
                out.check(f"{what}: tensor_list[{j}]")
            mine.check(f"{what}: the input changed")
            whole = sentinel_out(kit, (2 * n, 3), dtype, layout)
            finish(tensor_form(adapter(), whole.view, mine.view, handle, async_op), async_op)
            whole.result(np.concatenate([_data(seed + dtype, j, (2, 3), dtype) for j in range(n)]))
            whole.check(f"{what}: into_tensor")


def case_gather(kit: Any, algorithm: str, async_op: bool) -> None:
    dtypes, layouts = (FEW_DTYPES, FEW_LAYOUTS) if async_op else ([*DTYPES, "uint8"], VIEW_LAYOUTS)
    _both_forms(kit, algorithm, async_op, None, f"algo-gather-{algorithm}", dtypes, layouts)


def case_gather_subgroup(kit: Any, algorithm: str) -> None:
    group = subgroup()
    if rank() in members(group):
        seed = f"algo-gather-group-{algorithm}"
        _both_forms(kit, algorithm, False, group, seed, FEW_DTYPES, FEW_LAYOUTS)


def case_gather_uneven(kit: Any, algorithm: str, async_op: bool) -> None:
    """Parts of different dim-0 sizes, rank 0's empty; then every part empty."""
    run = getattr(algorithms, algorithm)
    n, me = world(), rank()
    seed = f"algo-gather-uneven-{algorithm}"
    for sizes in ([(2 * r) % 5 for r in range(n)], [0] * n):
        mine = kit.tensor(values(seed, me, (sizes[me], 3)), "float32")
        outputs = [sentinel_out(kit, (size, 3), "float32", "interior") for size in sizes]
        finish(run(adapter(), [out.view for out in outputs], mine, None, async_op), async_op)
        for j, out in enumerate(outputs):
            out.result(values(seed, j, (sizes[j], 3)))
            out.check(f"{algorithm} {sizes}: tensor_list[{j}]")


#: (op, dtype) for the buffered all_reduce: every op, every dtype MCCL moves (float64 and uint8
#: too, which MCCL's all_reduce lacks).
ALL_REDUCE_COMBOS = [
    *((op, "float32") for op in ("sum", "prod", "min", "max", "avg")),
    *((op, "int64") for op in ("sum", "prod", "min", "max")),
    *(("sum", dtype) for dtype in ("float64", "int32", "float16", "bfloat16", "int8", "uint8")),
    ("max", "uint8"),
    ("avg", "float64"),
]


def _all_reduce_cases(
    kit: Any,
    algorithm: str,
    async_op: bool,
    group: Any,
    seed: str,
    combos: list[tuple[str, str]],
    layouts: tuple[str, ...],
) -> None:
    ranks = members(group)
    handle = None if group is None else group.handle
    shapes = [(5, 3), (1, 4), (0, 3)]  # (1, 4): fewer rows than ranks; (0, 3): empty
    for op, dtype in combos:
        for layout in layouts:
            for shape in shapes:
                what = f"{algorithm} {op} {dtype} {layout} {shape}"
                key = f"{seed}-{op}-{dtype}-{shape}"
                x = Placed(kit, _data(key, rank(), shape, dtype, op), dtype, layout)
                pending = getattr(algorithms, algorithm)(
                    adapter(), x.view, ReduceOp(op), handle, async_op
                )
                finish(pending, async_op)
                x.result(reduce_np([_data(key, r, shape, dtype, op) for r in ranks], op))
                x.check(what)


#: Algorithms the capability table does not choose on two ranks or more (measured slower there;
#: kept, tested and named in capabilities.toml), whose every call there is several MCCL
#: messages of milliseconds: the synchronous run takes a flat view and a view without one (a
#: quarter of make test's MindSpore time at 3 ranks with every layout). In a world of one they
#: send nothing, so every layout costs little there.
NOT_CHOSEN_LAYOUTS = {"buffered_send_all_reduce": ("dense", "transposed")}


def case_all_reduce(kit: Any, algorithm: str, async_op: bool) -> None:
    # Transposed: no flat view, so dim 0 is cut (bfloat16 too: numpy has no such dtype).
    every = ("dense", "interior", "column", "transposed")
    few = every if world() == 1 else NOT_CHOSEN_LAYOUTS.get(algorithm, every)
    layouts = FEW_LAYOUTS if async_op else few
    combos = [("sum", "float32"), ("avg", "float64")] if async_op else ALL_REDUCE_COMBOS
    _all_reduce_cases(kit, algorithm, async_op, None, "algo-all-reduce", combos, layouts)


def case_all_reduce_subgroup(kit: Any, algorithm: str) -> None:
    group = subgroup()
    if rank() in members(group):
        combos = [("sum", "float32"), ("max", "uint8")]
        seed = "algo-all-reduce-group"
        _all_reduce_cases(kit, algorithm, False, group, seed, combos, FEW_LAYOUTS)


def case_all_reduce_same_bits(kit: Any, algorithm: str) -> None:
    """Every rank ends with the same bits: random float32 values, whose sums depend on the
    order of the additions, reduced by one rank per part."""
    n = world()
    for index, op in enumerate(("sum", "avg", "prod")):
        inputs = [np.random.default_rng([r, index]).standard_normal(1001) for r in range(n)]
        x = kit.tensor(inputs[rank()].astype(np.float32), "float32")
        finish(getattr(algorithms, algorithm)(adapter(), x, ReduceOp(op), None, False), False)
        gathered = [kit.tensor(np.zeros(1001), "float32") for _ in range(n)]
        compat.all_gather(gathered, x)
        mine = kit.numpy(x)
        for j, other in enumerate(gathered):
            assert kit.numpy(other).tobytes() == mine.tobytes(), f"{op}: rank {j} differs"
        expected = reduce_np([item.astype(np.float32).astype(np.float64) for item in inputs], op)
        np.testing.assert_allclose(mine, expected, rtol=1e-5, atol=1e-5, err_msg=op)


def _a2a_rows(sender: int, receiver: int) -> int:
    return (sender + 2 * receiver + 1) % 3  # a rank's own part 1 row; empty pairs (0 rows)


def _a2a_cases(
    kit: Any,
    algorithms_: tuple[str, str],
    async_op: bool,
    group: Any,
    seed: str,
    dtypes: list[str],
    layouts: tuple[str, ...],
    rows: Callable[[int, int], int] = _a2a_rows,
    columns: int = 3,
) -> None:
    """all_to_all_single and all_to_all by ``algorithms_`` (their names): uneven parts with empty
    pairs (``rows(sender, receiver)`` rows of ``columns``), every dtype, the tensors as views in
    sentinel-filled tensors."""
    single, listed = (getattr(algorithms, name) for name in algorithms_)
    ranks = members(group)
    n, me = len(ranks), ranks.index(rank())
    handle = None if group is None else group.handle
    send = [rows(me, i) for i in range(n)]
    receive = [rows(j, me) for j in range(n)]
    for dtype in dtypes:

        def part(sender: int, receiver: int, dtype: str = dtype) -> np.ndarray:
            shape = (rows(sender, receiver), columns)
            return _data(f"{seed}-{dtype}", sender * 10 + receiver, shape, dtype)

        for layout in layouts:
            what = f"{algorithms_[0]} {dtype} {layout}"
            source = Placed(kit, np.concatenate([part(me, i) for i in range(n)]), dtype, layout)
            out = sentinel_out(kit, (sum(receive), columns), dtype, layout)
            pending = single(adapter(), out.view, source.view, receive, send, handle, async_op)
            finish(pending, async_op)
            out.result(np.concatenate([part(j, me) for j in range(n)]))
            out.check(what)
            source.check(f"{what}: the input changed")
            inputs = [Placed(kit, part(me, i), dtype, layout) for i in range(n)]
            outputs = [sentinel_out(kit, (receive[j], columns), dtype, layout) for j in range(n)]
            pending = listed(
                adapter(), [item.view for item in outputs], [item.view for item in inputs],
                handle, async_op,
            )  # fmt: skip
            finish(pending, async_op)
            for j, item in enumerate(outputs):
                item.result(part(j, me))
                item.check(f"{what} (list form): part from group rank {j}")
            for item in inputs:
                item.check(f"{what} (list form): an input changed")


def case_all_to_all(kit: Any, algorithms_: tuple[str, str], async_op: bool) -> None:
    dtypes, layouts = (FEW_DTYPES, FEW_LAYOUTS) if async_op else ([*DTYPES, "uint8"], VIEW_LAYOUTS)
    _a2a_cases(kit, algorithms_, async_op, None, "algo-a2a", dtypes, layouts)


def case_all_to_all_subgroup(kit: Any, algorithms_: tuple[str, str]) -> None:
    group = subgroup()
    if rank() in members(group):
        _a2a_cases(kit, algorithms_, False, group, "algo-a2a-group", FEW_DTYPES, FEW_LAYOUTS)


def case_all_to_all_large(kit: Any, algorithms_: tuple[str, str]) -> None:
    """Parts larger than a point-to-point channel (1 MB at 2-3 ranks, 2 MB shared out beyond),
    which their receivers read straight from the senders' memory, next to an empty one; both
    forms, as views in sentinel-filled tensors."""
    n = world()

    def rows(sender: int, receiver: int) -> int:
        """Rows of 64 float32: 1.5 MB and a few rows more per pair; rank 0 sends the last
        rank nothing."""
        empty = (sender, receiver) == (0, n - 1)
        return 0 if empty else 3 * 2**20 // 2 // 256 + 7 * (sender + 2 * receiver)

    layouts = ("dense", "interior")
    _a2a_cases(kit, algorithms_, False, None, "algo-a2a-large", ["float32"], layouts, rows, 64)


_register(
    "shared_memory_p2p_all_to_all", "-large", case_all_to_all_large, BOTH,
    algorithms_=("shared_memory_p2p_all_to_all", "shared_memory_p2p_all_to_all_list"),
)  # fmt: skip


for _algorithm, _frameworks in GATHER_ALGORITHMS.items():
    _register_sync_and_async(_algorithm, "", case_gather, _frameworks, algorithm=_algorithm)
    _register_sync_and_async(
        _algorithm, "-uneven", case_gather_uneven, _frameworks, algorithm=_algorithm
    )
    _register(_algorithm, "-subgroup", case_gather_subgroup, _frameworks, algorithm=_algorithm)
for _algorithm, _frameworks in ALL_REDUCE_ALGORITHMS.items():
    _register_sync_and_async(_algorithm, "", case_all_reduce, _frameworks, algorithm=_algorithm)
    _register(_algorithm, "-subgroup", case_all_reduce_subgroup, _frameworks, algorithm=_algorithm)
    _register(
        _algorithm, "-same-bits", case_all_reduce_same_bits, _frameworks, algorithm=_algorithm
    )
for _names, _frameworks in A2A_ALGORITHMS.items():
    _register_sync_and_async(_names[0], "", case_all_to_all, _frameworks, algorithms_=_names)
    _register(_names[0], "-subgroup", case_all_to_all_subgroup, _frameworks, algorithms_=_names)

#: The reducing collectives an emulate rule of capabilities.toml covers whose backend call runs
#: here, each called the public way on float32 (rank r holds r + 1 + i * 0.25), reduce to rank
#: 0 (MCCL runs only all_reduce natively).
REDUCING = {
    "torch": ("all_reduce", "reduce", "reduce_scatter_tensor"),
    "mindspore": ("all_reduce",),
}


def case_reduce_ops_by_release(kit: Any) -> None:
    """Every op of each reducing collective with the backend's own call forced (as compat bench
    --algorithm native does): right on every op at this framework release, through the
    backend's reduction where it has the op, through the emulation its table's emulate rule
    names where it lacks it or gets it wrong (Gloo before torch 2.8 and mint.distributed before
    MindSpore 2.10: AVG raises; Gloo before torch 2.11: reduce_scatter sums whatever the op);
    and the table's claim that the backend lacks an op is true of the running release."""
    current, n = state.current(), world()
    key = current.capability_key
    for collective in REDUCING[kit.framework]:
        emulated = dict(capabilities.emulations(key, collective, "native"))
        for dtype, ops in (("float32", FLOAT_OPS), ("int32", BITWISE_OPS)):
            current.force(collective, dtype, "native")
            try:
                for op in ops:
                    what = f"{collective} {op} {dtype} ({emulated.get(op)})"
                    _check_reduction(kit, collective, op, n, what, dtype)
            finally:
                current.force(collective, dtype, None)
        for op in sorted(capabilities.lacked_ops(key, collective)):
            _check_backend_lacks(kit, collective, op, n)


def _check_backend_lacks(kit: Any, collective: str, op: str, n: int) -> None:
    """The table's claim that the backend's own ``collective`` lacks ``op`` at this release is
    true: the adapter's call raises, or (a group of 2 or more, where ops differ) is wrong. A
    bitwise op is tried on integers (on floats every backend refuses it)."""
    if tables.lookup("reduce_ops", "ops", op).get("integer_only"):
        dtype, parts = "int32", [np.arange(2 * n) * 3 + 5 * r + 1 for r in range(n)]
    else:
        dtype = "float32"
        parts = [np.arange(2 * n, dtype=np.float64) * 0.25 + r + 1 for r in range(n)]
    x = kit.tensor(parts[rank()], dtype)
    native = adapter()
    try:
        if collective == "all_reduce":
            native.all_reduce(x, ReduceOp(op), None, False)
            got, expected = kit.numpy(x), reduce_np(parts, op)
        elif collective == "reduce":
            native.reduce(x, 0, ReduceOp(op), None, False)
            if rank() != 0:  # only the root's result is defined
                return
            got, expected = kit.numpy(x), reduce_np(parts, op)
        else:
            out = kit.tensor(np.zeros(2), dtype)
            native.reduce_scatter_tensor(out, x, ReduceOp(op), None, False)
            got, expected = kit.numpy(out), reduce_np(parts, op)[2 * rank() : 2 * rank() + 2]
    except Exception:  # the backend refuses the op: what the table says
        return
    if n > 1:
        assert not np.allclose(got, expected), f"{collective} {op}: the backend got it right"


#: the ops case_reduce_ops_by_release runs on float32, and the bitwise ones it runs on int32
FLOAT_OPS = ("sum", "prod", "min", "max", "avg")
BITWISE_OPS = ("band", "bor", "bxor")


def _check_reduction(
    kit: Any, collective: str, op: str, n: int, what: str, dtype: str = "float32"
) -> None:
    if dtype == "float32":
        parts = [np.arange(2 * n, dtype=np.float64) * 0.25 + r + 1 for r in range(n)]
    else:
        parts = [np.arange(2 * n) * 3 + 5 * r + 1 for r in range(n)]
    expected = reduce_np(parts, op)
    x = kit.tensor(parts[rank()], dtype)
    if collective == "all_reduce":
        compat.all_reduce(x, op=op)
        assert_close(kit.numpy(x), expected, dtype, what)
    elif collective == "reduce":
        compat.reduce(x, 0, op=op)
        if rank() == 0:
            assert_close(kit.numpy(x), expected, dtype, what)
    else:
        mine = compat.reduce_scatter_tensor(x, op=op)
        assert_close(kit.numpy(mine), expected[2 * rank() : 2 * rank() + 2], dtype, what)


register("algorithm-choice", case_choice)
# One case per framework: each checks its own backends' collectives, so the parity test does
# not compare their records.
for _framework in ("torch", "mindspore"):
    register(
        f"versions-reduce-ops[{_framework}]", case_reduce_ops_by_release, frameworks=(_framework,)
    )
register("algorithm-choice-gather", case_choice_gather)
register("algorithm-choice-by-group-size", case_choice_by_group_size)
