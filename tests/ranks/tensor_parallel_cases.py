"""compat.tensor.parallel on real ranks: a 2-layer MLP (Colwise then Rowwise, torch's Megatron
plan) and single layers in each layout, their outputs and every parameter's and the input's
gradients compared with numpy's for the whole model (this rank's torch.chunk piece of each
sharded gradient). On torch the names are torch's own objects, and the same expectations hold
for torch's DTensor parameters (their local pieces); on MindSpore they are compat's emulation
on nn.Dense / mint.nn.Linear Cells. Each rank starts from other weights, so the results also
show that the weights of mesh rank ``src_data_rank`` are the ones kept."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import compat
from tests.ranks.cases import random_floats, rank, register, world

TOLERANCE = {"rtol": 2e-5, "atol": 2e-5}
IN, HIDDEN, OUT = 5, 8, 6  # HIDDEN at 3 ranks: torch.chunk's pieces 3, 3, 2


def _chunk(size: int, parts: int) -> list[slice]:
    step = -(-size // parts)
    return [slice(min(i * step, size), min((i + 1) * step, size)) for i in range(parts)]


def _mine(size: int) -> slice:
    return _chunk(size, world())[rank()]


def _weights(seed: str, who: int, hidden: int) -> dict[str, np.ndarray]:
    """Rank ``who``'s MLP weights, ``hidden`` features between the layers (each rank's differ)."""
    return {
        name: random_floats(f"{seed}-{name}", who, shape)
        for name, shape in (("w1", (hidden, IN)), ("b1", (hidden,)),
                            ("w2", (OUT, hidden)), ("b2", (OUT,)))
    }  # fmt: skip


def _kept(kit: Any, seed: str, src: int | None, hidden: int) -> dict[str, np.ndarray]:
    """The weights the parallelized MLP computes with: mesh rank ``src``'s; for None, each
    rank's own piece of the sharded ones, and for the replicated bias b2 (whose copies then
    differ) torch's DTensor adds the mean of the ranks' (a Replicate value made Partial is
    divided among them), compat's emulation this rank's own."""
    if src is not None:
        return _weights(seed, src, hidden)
    kept = _weights(seed, rank(), hidden)
    for who, piece in enumerate(_chunk(hidden, world())):
        theirs = _weights(seed, who, hidden)
        kept["w1"][piece], kept["b1"][piece] = theirs["w1"][piece], theirs["b1"][piece]
        kept["w2"][:, piece] = theirs["w2"][:, piece]
    if kit.framework == "torch":
        kept["b2"] = np.mean([_weights(seed, who, hidden)["b2"] for who in range(world())], axis=0)
    return kept


def _reference(
    p: dict[str, np.ndarray], x: np.ndarray, c: np.ndarray, relu: bool = True
) -> dict[str, np.ndarray]:
    """numpy's forward and backward of sum(mlp(x) * c), mlp = w2 relu(w1 x + b1) + b2 (without
    relu where ``relu`` is False)."""
    z = x @ p["w1"].T + p["b1"]
    h = np.maximum(z, 0) if relu else z
    out = h @ p["w2"].T + p["b2"]
    flat = (-1, out.shape[-1])
    dz = (c @ p["w2"]) * ((z > 0) if relu else 1)
    return {
        "out": out,
        "w1": dz.reshape(-1, dz.shape[-1]).T @ x.reshape(-1, IN),
        "b1": dz.reshape(-1, dz.shape[-1]).sum(0),
        "w2": c.reshape(flat).T @ h.reshape(-1, h.shape[-1]),
        "b2": c.reshape(flat).sum(0),
        "x": dz @ p["w1"],
    }


def _mlp(kit: Any, p: dict[str, np.ndarray], kinds: tuple[str, str], relu: bool = True) -> Any:
    """The framework's MLP with this rank's weights: torch nn.Linear layers, or MindSpore's
    nn.Dense ("dense") / mint.nn.Linear ("linear") Cells (``relu``: between them, else none)."""
    first = _linear(kit, p["w1"], p["b1"], kinds[0])
    second = _linear(kit, p["w2"], p["b2"], kinds[1])
    if kit.framework == "torch":
        import torch

        class TorchMLP(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.w1, self.w2 = first, second

            def forward(self, x: Any) -> Any:
                hidden = self.w1(x)
                return self.w2(torch.relu(hidden) if relu else hidden)

        return TorchMLP()
    import mindspore as ms

    class MindSporeMLP(ms.nn.Cell):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.w1, self.w2 = first, second

        def construct(self, x: Any) -> Any:
            hidden = self.w1(x)
            return self.w2(ms.mint.nn.functional.relu(hidden) if relu else hidden)

    return MindSporeMLP()


def _linear(kit: Any, weight: np.ndarray, bias: np.ndarray | None, kind: str) -> Any:
    out, inputs = weight.shape
    if kit.framework == "torch":
        import torch

        layer = torch.nn.Linear(inputs, out, bias=bias is not None)
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(weight))
            if bias is not None:
                layer.bias.copy_(torch.from_numpy(bias))
        return layer
    import mindspore as ms

    w = ms.Tensor(weight)
    b = None if bias is None else ms.Tensor(bias)
    if kind == "dense":
        return ms.nn.Dense(inputs, out, weight_init=w, bias_init=b, has_bias=bias is not None)
    return ms.mint.nn.Linear(inputs, out, bias=bias is not None, weight_init=w, bias_init=b)


def _run(kit: Any, model: Any, x: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    """The model's output on ``x`` and the gradients of sum(output * c): this rank's pieces."""
    names = [name for name, _ in _parameters(kit, model)]
    if kit.framework == "torch":
        tensor = kit.tensor(x, "float32").requires_grad_(True)
        out = _local(model(tensor))
        (out * kit.tensor(c, "float32")).sum().backward()
        grads = [_local(p.grad) for _, p in _parameters(kit, model)]
        found = {"out": kit.numpy(_local(out).detach()), "x": kit.numpy(tensor.grad)}
    else:
        import mindspore as ms

        weights = [p for _, p in _parameters(kit, model)]
        target = kit.tensor(c, "float32")

        def loss(t: Any) -> Any:
            return (_local(model(t)) * target).sum()

        out = _local(model(kit.tensor(x, "float32")))
        _, (grad_x, grads) = ms.value_and_grad(loss, 0, weights)(kit.tensor(x, "float32"))
        found = {"out": kit.numpy(out), "x": kit.numpy(grad_x)}
    found.update({name: kit.numpy(grad) for name, grad in zip(names, grads, strict=True)})
    return found


def _local(tensor: Any) -> Any:
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def _parameters(kit: Any, model: Any) -> list[tuple[str, Any]]:
    """The parameters in the model's order, named w1, b1, w2, b2 (one layer: w, b)."""
    if kit.framework == "torch":
        named = list(model.named_parameters())
    else:
        named = [(p.name, p) for p in model.trainable_params()]
    short = []
    for name, parameter in named:
        layer, _, kind = name.rpartition(".")
        short.append((("w" if kind == "weight" else "b") + layer[1:], parameter))
    return short


def _agree(label: str, found: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    for name, value in expected.items():
        np.testing.assert_allclose(
            found[name], value, **TOLERANCE, err_msg=f"{label}: {name} (rank {rank()})"
        )


def _mesh() -> Any:
    return compat.init_device_mesh("cpu", (world(),), mesh_dim_names=("tp",))


def case_tp_names_are_the_frameworks(kit: Any) -> None:
    """On torch the names are torch's own objects; on MindSpore compat's own."""
    import compat.tensor.parallel as tp

    if kit.framework == "torch":
        import torch.distributed.tensor.parallel as theirs

        for name in tp.__all__:
            assert getattr(tp, name) is getattr(theirs, name), name
    else:
        from compat.tensor.parallel import api, style

        assert tp.parallelize_module is api.parallelize_module
        assert tp.ColwiseParallel is style.ColwiseParallel
        assert issubclass(tp.RowwiseParallel, tp.ParallelStyle)


def _hiddens(kit: Any) -> list[int]:
    """The MLP's hidden sizes: even pieces at every world size, and at 3 ranks on MindSpore
    torch.chunk's uneven ones (3, 3, 2). torch's RowwiseParallel takes a local Shard(-1) input
    as an even piece (DTensor.from_local's global shape is local x n) and its matmul then
    refuses uneven ones; compat's emulation computes them."""
    if world() == 3:
        return [6, 8] if kit.framework == "mindspore" else [6]
    return [8]


def case_tp_mlp(kit: Any) -> None:
    """The Megatron MLP (w1 Colwise, w2 Rowwise) on a 2-D and a 3-D input, with the weights of
    mesh rank 0, of the last mesh rank, and (src_data_rank=None) each rank's own."""
    from compat.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    kinds = {"torch": [("", "")], "mindspore": [("dense", "linear"), ("linear", "dense")]}
    for hidden in _hiddens(kit):
        for pair in kinds[kit.framework]:
            for src in (0, world() - 1, None):
                for shape in ((4, IN), (2, 3, IN)):
                    label = f"MLP {hidden} {pair} src_data_rank={src} input {shape}"
                    model = _mlp(kit, _weights(label, rank(), hidden), pair)
                    plan = {"w1": ColwiseParallel(), "w2": RowwiseParallel()}
                    assert parallelize_module(model, _mesh(), plan, src_data_rank=src) is model
                    x = random_floats(f"{label}-x", 0, shape)
                    c = random_floats(f"{label}-c", 0, (*shape[:-1], OUT))
                    full = _reference(_kept(kit, label, src, hidden), x, c)
                    mine = _mine(hidden)
                    pieces = {**full, "w1": full["w1"][mine], "b1": full["b1"][mine],
                              "w2": full["w2"][:, mine]}  # fmt: skip
                    _agree(label, _run(kit, model, x, c), pieces)


def case_tp_dtensor(kit: Any) -> None:
    """use_local_output=False: each layer returns a DTensor (Colwise: Shard(-1) of the global
    hidden size; Rowwise: Replicate), and Rowwise takes the DTensor as its input by its own
    placements; inside 'with mesh:' parallelize_module takes that mesh."""
    from compat.tensor import DTensor, Replicate, Shard
    from compat.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    hidden = _hiddens(kit)[0]
    label = f"tp-dtensor-{hidden}"
    weights = _weights(label, 0, hidden)
    model = _mlp(kit, weights, ("linear", "dense"), relu=False)
    mesh = _mesh()
    with mesh:
        parallelize_module(model, None, {
            "w1": ColwiseParallel(use_local_output=False),
            "w2": RowwiseParallel(use_local_output=False),
        })  # fmt: skip
    x = random_floats(f"{label}-x", 0, (4, IN))
    c = random_floats(f"{label}-c", 0, (4, OUT))
    inner = model.w1(kit.tensor(x, "float32"))
    assert isinstance(inner, DTensor) and inner.placements == (Shard(1),), inner  # -1 made 1
    assert tuple(inner.shape) == (4, hidden) and inner.device_mesh == mesh
    outer = model(kit.tensor(x, "float32"))
    assert isinstance(outer, DTensor) and outer.placements == (Replicate(),), outer
    assert tuple(outer.shape) == (4, OUT)
    full = _reference(weights, x, c, relu=False)
    mine = _mine(hidden)
    pieces = {**full, "w1": full["w1"][mine], "b1": full["b1"][mine], "w2": full["w2"][:, mine]}
    _agree(label, _run(kit, model, x, c), pieces)


def _one_layer(kit: Any, style: Any, seed: str, shape: tuple[int, ...], given: np.ndarray) -> Any:
    """A model of one linear layer (HIDDEN -> OUT) parallelized with ``style``, its output and
    gradients on this rank's input ``given`` (the loss: sum(out * c) of the full output)."""
    from compat.tensor.parallel import parallelize_module

    weight = random_floats(f"{seed}-w", 0, (OUT, HIDDEN))
    bias = random_floats(f"{seed}-b", 0, (OUT,))
    layer = _linear(kit, weight, bias, "dense" if kit.framework == "mindspore" else "")
    parallelize_module(layer, _mesh(), style)
    return layer, weight, bias


def case_tp_layouts(kit: Any) -> None:
    """One layer in each of the other layouts: Colwise with a Shard(0) input and a Replicate
    output, Rowwise with a Replicate input and a Shard(0) / Shard(-1) output."""
    from compat.tensor import Replicate, Shard
    from compat.tensor.parallel import ColwiseParallel, RowwiseParallel

    rows = 2 * world()
    x = random_floats("tp-layouts-x", 0, (rows, HIDDEN))
    mine = slice(2 * rank(), 2 * rank() + 2)
    cases: list[tuple[str, Any, np.ndarray, Callable[[np.ndarray], np.ndarray], Any]] = [
        ("colwise S(0) in, R out",
         ColwiseParallel(input_layouts=Shard(0), output_layouts=Replicate()),
         x[mine], lambda o: o, mine),
        ("rowwise R in, S(0) out",
         RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(0)),
         x, lambda o: o[_chunk(rows, world())[rank()]], slice(None)),
        ("rowwise R in, S(-1) out",
         RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(-1)),
         x, lambda o: o[:, _mine(OUT)], slice(None)),
    ]  # fmt: skip
    for label, style, given, local_out, x_rows in cases:
        seed = f"tp-layouts-{label}"
        layer, weight, bias = _one_layer(kit, style, seed, x.shape, given)
        c = random_floats(f"{seed}-c", 0, (rows, OUT))
        found = _run(kit, layer, given, local_out(c))
        out = x @ weight.T + bias
        dx = c @ weight
        expected = {"out": local_out(out), "x": dx[x_rows]}
        if isinstance(style, ColwiseParallel):
            expected |= {"w": (c.T @ x)[_mine(OUT)], "b": c.sum(0)[_mine(OUT)]}
        else:
            expected |= {"w": (c.T @ x)[:, _mine(HIDDEN)], "b": c.sum(0)}
        if isinstance(style, RowwiseParallel):
            expected["x"] = dx  # the gradient of a Replicate input is replicated
        _agree(label, found, expected)


def case_tp_plan_paths(kit: Any) -> None:
    """torch's plan walk: "*" wildcards in paths, "" for the module itself, a warning (and
    nothing done) for a path that matches nothing; the styles' reprs are torch's."""
    from compat.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    seed = "tp-paths"
    weights = _weights(seed, 0, 6)  # every rank's: src_data_rank 0 keeps rank 0's
    model = _mlp(kit, weights, ("dense", "linear"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = {"w*1": ColwiseParallel(), "w2": RowwiseParallel(), "nowhere": ColwiseParallel()}
        parallelize_module(model, _mesh(), plan)
    assert any("nowhere" in str(w.message) for w in caught), [str(w.message) for w in caught]
    x = random_floats(f"{seed}-x", 0, (3, IN))
    c = random_floats(f"{seed}-c", 0, (3, OUT))
    full = _reference(weights, x, c)
    assert np.allclose(_run(kit, model, x, c)["out"], full["out"], **TOLERANCE)
    assert repr(ColwiseParallel()) == (
        "ColwiseParallel(input_layouts=(Replicate(),), output_layouts=(Shard(dim=-1),), "
        "use_local_output=True)"
    )


def _refused(kind: type[Exception], message: str, call: Callable[[], object]) -> None:
    with pytest.raises(kind, match=message):
        call()


def case_tp_bad_input(kit: Any) -> None:
    """compat's own checks (MindSpore): each refused on the calling rank before any
    communication, naming the parameter (the ranks then go on together)."""
    import mindspore as ms

    from compat.tensor import Partial, Replicate
    from compat.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = _mesh()
    layer = ms.nn.Dense(HIDDEN, OUT, activation="relu")
    square = compat.init_device_mesh("cpu", (1, world()), mesh_dim_names=("a", "b"))
    unsupported = compat.UnsupportedError
    for kind, message, call in [
        (unsupported, r"^ColwiseParallel: compat's emulation parallelizes linear layers "
         r"\(mindspore.nn.Dense, mindspore.mint.nn.Linear\); got mindspore.nn.layer.embedding"
         r".Embedding",
         lambda: parallelize_module(ms.nn.Embedding(10, 4), mesh, ColwiseParallel())),
        (unsupported, r"^RowwiseParallel: the layer applies ReLU to its partial sums",
         lambda: parallelize_module(layer, mesh, RowwiseParallel())),
        (unsupported, rf"^ColwiseParallel: the weight's rows of 1 cut into {world()} pieces",
         lambda: parallelize_module(ms.nn.Dense(4, 1), mesh, ColwiseParallel())),
        (ValueError, r"^device_mesh: expected a 1-D DeviceMesh \(slice one dim first, as "
         r"mesh\['tp'\]\); got DeviceMesh\(\(a=1, b=",
         lambda: parallelize_module(layer, square, ColwiseParallel())),
        (RuntimeError, r"^device_mesh: expected a DeviceMesh, or a call inside 'with mesh:'",
         lambda: parallelize_module(layer, None, ColwiseParallel())),
        (TypeError, r"^parallelize_plan: expected a ParallelStyle or a dict of module paths",
         lambda: parallelize_module(layer, mesh, [ColwiseParallel()])),
        (TypeError, r"^parallelize_plan: expected str module paths mapped to ParallelStyles",
         lambda: parallelize_module(layer, mesh, {"": "colwise"})),
        (TypeError, r"^module: expected a mindspore module \(a Cell\); got",
         lambda: parallelize_module(kit.tensor([1.0], "float32"), mesh, ColwiseParallel())),
        (ValueError, rf"^src_data_rank: expected None or a rank of the mesh, 0 to {world() - 1}; "
         rf"got {world()}",
         lambda: parallelize_module(layer, mesh, ColwiseParallel(), src_data_rank=world())),
        (unsupported, r"^input_layouts: expected None, Shard\(dim\) or Replicate\(\)",
         lambda: ColwiseParallel(input_layouts=Partial())),
        (TypeError, r"^output_layouts: expected None, Shard\(dim\) or Replicate\(\)",
         lambda: RowwiseParallel(output_layouts="replicate")),
    ]:  # fmt: skip
        _refused(kind, message, call)
    # nothing was sharded: the layer's weight is whole, and the ranks still agree
    assert tuple(layer.weight.shape) == (OUT, HIDDEN)
    parallelize_module(layer, mesh, ColwiseParallel())
    rows = _mine(OUT)
    assert tuple(layer.weight.shape) == (rows.stop - rows.start, HIDDEN)  # this rank's rows
    _refused(RuntimeError, r"^parallelize_module: a module is parallelized once",
             lambda: parallelize_module(layer, mesh, ColwiseParallel()))  # fmt: skip
    # an input of the wrong size: refused in the forward pre-hook, before its collectives
    whole = kit.tensor(np.ones((2, HIDDEN)), "float32")
    row = ms.nn.Dense(HIDDEN, OUT)
    parallelize_module(row, mesh, RowwiseParallel())
    _refused(ValueError, r"^input: expected this rank's Shard\(-1\) piece of the layer's 8 input "
             r"features", lambda: row(whole))  # fmt: skip
    cut = ms.nn.Dense(HIDDEN, OUT)
    parallelize_module(cut, mesh, RowwiseParallel(input_layouts=Replicate()))
    _refused(ValueError, r"^input: expected a Replicate input with the layer's 8 input features",
             lambda: cut(whole[:, :-1]))  # fmt: skip


register("tp-names", case_tp_names_are_the_frameworks)
register("tp-mlp", case_tp_mlp, min_world=2)
register("tp-layouts", case_tp_layouts, min_world=2)
register("tp-dtensor", case_tp_dtensor, min_world=2)
register("tp-plan_paths", case_tp_plan_paths, min_world=2)
register("tp-bad_input", case_tp_bad_input, min_world=2, frameworks=("mindspore",))
