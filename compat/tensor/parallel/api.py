"""compat's own :func:`parallelize_module`, torch's
``torch.distributed.tensor.parallel.parallelize_module`` for the frameworks without DTensor
(MindSpore's Cells): the plan's modules found as torch finds them (``fnmatch`` wildcards on each
dotted part, a warning for a path that matches nothing), every argument and every module checked
on the calling rank before any communication, then each style applied."""

from __future__ import annotations

import warnings
from fnmatch import fnmatch
from typing import Any

from compat.core import state
from compat.core.values import check_int, describe
from compat.mesh import DeviceMesh, current_mesh
from compat.tensor.parallel.style import APPLIED, ParallelStyle


def parallelize_module(
    module: Any,
    device_mesh: DeviceMesh | None = None,
    parallelize_plan: ParallelStyle | dict[str, ParallelStyle] | None = None,
    *,
    src_data_rank: int | None = 0,
) -> Any:
    """Parallelize ``module`` (or its submodules named by the plan's paths) on the 1-D
    ``device_mesh`` with ``parallelize_plan``: a ParallelStyle, or a dict of dotted module paths
    (each part an fnmatch pattern such as ``layers.*.w1``; "" is ``module`` itself) to styles.
    ``src_data_rank``: the mesh rank whose parameters every rank takes (None: each its own, no
    communication). Returns ``module``; a plan of None warns and does nothing, as torch's."""
    mesh = _checked_mesh(device_mesh)
    if parallelize_plan is None:
        warnings.warn(
            "No parallelize_plan is provided and auto-parallel is not supported at the moment, "
            "so this parallelize_module call will do nothing.",
            stacklevel=2,
        )
        return module
    _check_arguments(module, mesh, src_data_rank)
    targets = _targets(module, parallelize_plan)
    _check_targets(targets, mesh)
    for target, style in targets:
        style.src_data_rank = src_data_rank
        style._apply(target, mesh)
        object.__setattr__(target, APPLIED, True)
    return module


def _check_arguments(module: object, mesh: DeviceMesh, src_data_rank: object) -> None:
    adapter = state.checked().adapter
    if adapter.module_children(module) is None:
        raise TypeError(
            f"module: expected a {adapter.framework} module (a Cell); got {describe(module)}"
        )
    if src_data_rank is not None:
        rank = check_int(src_data_rank, "src_data_rank")
        if not 0 <= rank < mesh.size():
            raise ValueError(
                f"src_data_rank: expected None or a rank of the mesh, 0 to {mesh.size() - 1}; "
                f"got {rank}"
            )


def _checked_mesh(device_mesh: object) -> DeviceMesh:
    if device_mesh is None:
        device_mesh = current_mesh()  # the mesh of 'with mesh:', as torch's
    if not isinstance(device_mesh, DeviceMesh):
        raise TypeError(f"device_mesh: expected a 1-D DeviceMesh; got {describe(device_mesh)}")
    if device_mesh.ndim != 1:
        raise ValueError(
            f"device_mesh: expected a 1-D DeviceMesh (slice one dim first, as mesh['tp']); got "
            f"{device_mesh!r}, of {device_mesh.ndim} dims"
        )
    if device_mesh.get_coordinate() is None:
        raise ValueError(
            f"device_mesh: expected a mesh this rank is in; rank {device_mesh.get_rank()} is "
            f"outside {device_mesh!r}"
        )
    return device_mesh


def _targets(module: Any, plan: object) -> list[tuple[Any, ParallelStyle]]:
    """Each (module, style) the plan names, in the plan's order, as torch's walk finds them."""
    if isinstance(plan, ParallelStyle):
        return [(module, plan)]
    if not isinstance(plan, dict):
        raise TypeError(
            "parallelize_plan: expected a ParallelStyle or a dict of module paths to "
            f"ParallelStyles; got {describe(plan)}"
        )
    found: list[tuple[Any, ParallelStyle]] = []
    for path, style in plan.items():
        if not isinstance(path, str) or not isinstance(style, ParallelStyle):
            raise TypeError(
                "parallelize_plan: expected str module paths mapped to ParallelStyles; got "
                f"{path!r}: {describe(style)}"
            )
        matched = _matching(module, path.split(".")) if path else [module]
        if not matched:
            warnings.warn(
                f"Parallelize plan key '{path}' could not be resolved: no submodule matching "
                f"it in module {type(module).__name__}, skipping this plan entry.",
                stacklevel=3,
            )
        found += [(target, style) for target in matched]
    return found


def _matching(module: Any, parts: list[str]) -> list[Any]:
    children = state.checked().adapter.module_children(module) or []
    matched = [child for name, child in children if fnmatch(name, parts[0])]
    if len(parts) == 1:
        return matched
    return [found for child in matched for found in _matching(child, parts[1:])]


def _check_targets(targets: list[tuple[Any, ParallelStyle]], mesh: DeviceMesh) -> None:
    """Every module once, not parallelized before, and what compat's styles need of it."""
    seen: set[int] = set()
    for target, style in targets:
        if getattr(target, APPLIED, False) or id(target) in seen:
            raise RuntimeError(
                "parallelize_module: a module is parallelized once; "
                f"{type(target).__name__} already is (by an earlier call or another plan entry)"
            )
        seen.add(id(target))
        check = getattr(style, "_check", None)
        if check is not None:  # compat's styles; a user's own ParallelStyle checks in _apply
            check(target, mesh)
