"""Device meshes of the workloads: the ``mesh`` parameter's text, its devices, what records keep.

A mesh is written ``axis:size[,axis:size...]`` over the axes of :data:`AXES` (``data:4``,
``fsdp:2,tensor:2``), or ``none`` for one device and no sharding. The axes mean what they mean
in data, FSDP and tensor parallelism (as in MaxText's ``ici_*_parallelism``):

- ``data``: the batch's rows are split over it; parameters and optimizer state are replicated;
- ``fsdp``: the batch's rows are split over it too, and so is the first (input) dimension of
  every weight and of its optimizer state;
- ``tensor``: the second (output) dimension of every weight and every bias is split over it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: The mesh axes a ``mesh`` text may name, in the order the mesh lays them out.
AXES = ("data", "fsdp", "tensor")
#: The ``mesh`` of one device, no sharding.
NONE = "none"
MAX_DEVICES = 4096


def parse_mesh(text: str) -> dict[str, int]:
    """Axis name -> size of a ``mesh`` text (``{}`` for ``none``), in :data:`AXES` order.

    Raises:
        ValueError: Not ``none`` nor ``axis:size`` pairs of :data:`AXES` with sizes >= 1, an
            axis named twice, or more than :data:`MAX_DEVICES` devices (the message names
            ``mesh`` and the value).
    """
    if text == NONE:
        return {}
    sizes: dict[str, int] = {}
    for part in str(text).split(","):
        axis, sep, size = part.strip().partition(":")
        digits = size.isascii() and size.isdigit()  # "²" is a digit to str.isdigit, not to int
        if not sep or axis not in AXES or not digits or int(size) < 1 or axis in sizes:
            raise ValueError(
                f"mesh {text!r}: expected none or axis:size pairs such as data:4 or "
                f"fsdp:2,tensor:2, each axis once, of {', '.join(AXES)}"
            )
        sizes[axis] = int(size)
    if math.prod(sizes.values()) > MAX_DEVICES:
        raise ValueError(f"mesh {text!r}: more than {MAX_DEVICES} devices")
    return {axis: sizes[axis] for axis in AXES if axis in sizes}


def spelled(text: str) -> str:
    """The one spelling of a ``mesh`` text (``tensor:2,data:02`` -> ``data:2,tensor:2``).

    Its axes in :data:`AXES` order (the order the mesh lays them out), sizes without leading
    zeros. Two spellings of one mesh are one case, with one record key and one compile. A text that
    does not parse is returned as given, for the workload's check to name.
    """
    try:
        sizes = parse_mesh(text)
    except ValueError:
        return text
    return ",".join(f"{axis}:{n}" for axis, n in sizes.items()) or NONE


def device_count(text: str) -> int:
    """How many devices the ``mesh`` text spans (1 for ``none``)."""
    return math.prod(parse_mesh(text).values())


def mesh_devices(n: int) -> list[Any]:
    """``n`` devices of the platform of JAX's default device in force, for a mesh.

    In one process, its first ``n``. In a program over several JAX processes
    (:mod:`jaxbench.distributed`), an equal share of each process's devices, process by
    process, so the mesh spans them all (every process holds part of every sharded array).

    Raises:
        jaxbench.workloads.base.NotApplicable: The platform has fewer than ``n`` devices (the
            message names the ``XLA_FLAGS`` setting that gives a CPU more), or ``n`` is not a
            multiple of the number of processes.
    """
    import jax

    from jaxbench.workloads.base import NotApplicable

    default = jax.config.jax_default_device
    platform = getattr(default, "platform", None)
    devices = jax.devices(platform) if platform else jax.devices()
    processes = jax.process_count()
    kind = devices[0].platform
    if n % processes:
        raise NotApplicable(f"a mesh of {n} devices cannot take an equal share of each of the "
                            f"{processes} JAX processes' devices")  # fmt: skip
    if len(devices) < n:
        each = n // processes
        per = f" ({processes} processes)" if processes > 1 else ""
        hint = (f"; start with XLA_FLAGS=--xla_force_host_platform_device_count={each}"
                if kind == "cpu" else "")  # fmt: skip
        raise NotApplicable(f"needs {n} {kind} devices, {len(devices)} here{per}{hint}")
    share = n // processes
    chosen = [d for p in range(processes) for d in
              [d for d in devices if d.process_index == p][:share]]  # fmt: skip
    if len(chosen) < n:
        raise NotApplicable(f"needs {share} {kind} devices in each of the {processes} JAX "
                            f"processes; some have fewer")  # fmt: skip
    return chosen


def make_mesh(sizes: Mapping[str, int]) -> Any:
    """A ``jax.sharding.Mesh`` of :func:`mesh_devices`, axes as given.

    Raises:
        jaxbench.workloads.base.NotApplicable: Too few devices.
    """
    import jax
    import numpy as np

    n = math.prod(sizes.values())
    devices = np.array(mesh_devices(n)).reshape(tuple(sizes.values()))
    return jax.sharding.Mesh(devices, tuple(sizes))


def mesh_facts(mesh: Any) -> dict[str, Any]:
    """What a record keeps of a mesh: axis sizes by name, device ids, kinds and platform."""
    devices = list(mesh.devices.flat)
    return {
        "axes": dict(mesh.shape),
        "device_ids": [int(d.id) for d in devices],
        "device_kinds": sorted({str(d.device_kind) for d in devices}),
        "platform": devices[0].platform,
    }


def leaf_spec(ndim: int, axes: Mapping[str, int]) -> Any:
    """The partition spec of a parameter or optimizer-state leaf on a mesh of ``axes``.

    The first dimension of a leaf of two or more (a weight's input) over ``fsdp``, the last
    (its output; a bias's or a norm's only one) over ``tensor``; a scalar (Adam's step count)
    replicated. An axis the mesh lacks is ``None``.
    """
    from jax.sharding import PartitionSpec

    fsdp = "fsdp" if "fsdp" in axes else None
    tensor = "tensor" if "tensor" in axes else None
    if ndim == 0:
        return PartitionSpec()
    if ndim == 1:
        return PartitionSpec(tensor)
    return PartitionSpec(fsdp, *([None] * (ndim - 2)), tensor)


def batch_spec(axes: Mapping[str, int], ndim: int = 2) -> Any:
    """A batch leaf's partition spec: its rows over ``data`` and ``fsdp`` (those the mesh has)."""
    from jax.sharding import PartitionSpec

    rows = tuple(a for a in ("data", "fsdp") if a in axes)
    return PartitionSpec(rows or None, *([None] * (ndim - 1)))


def check_fits(text: str, shapes: Mapping[str, tuple[int, ...]], rows: int, model: str) -> None:
    """Raise ``ValueError`` naming ``mesh`` unless its axes divide every dimension they split.

    Args:
        text: The ``mesh`` parameter.
        shapes: The state's leaves by key path (:func:`leaf_spec` says which dimension of each
            is split).
        rows: The batch's rows (split over ``data`` x ``fsdp``).
        model: The model's name for the message (e.g. ``tiny MLP``).
    """
    axes = parse_mesh(text)
    parts = axes.get("data", 1) * axes.get("fsdp", 1)
    if rows % parts:
        raise ValueError(f"mesh {text!r} splits the batch's {rows} rows of the {model} into "
                         f"{parts} parts, which does not divide them")  # fmt: skip
    for path, shape in shapes.items():
        for dim, axis in zip(shape, leaf_spec(len(shape), axes), strict=True):
            if axis is not None and dim % axes[axis]:
                raise ValueError(
                    f"mesh {text!r} splits {path} {tuple(shape)} of the {model} over "
                    f"{axis}:{axes[axis]}, which does not divide {dim}"
                )


#: Steps jitted over a mesh, built once per process (a rebuilt case reuses its program).
_JITTED: dict[tuple[Any, ...], Any] = {}


def place_step(
    fn: Any, key: tuple[Any, ...], state0: Any, batch: Any, text: str, donate: bool
) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
    """A train step ``fn(state, batch) -> (state, loss)`` jitted over the mesh ``text``.

    The state's leaves are placed by :func:`leaf_spec`, the batch's by :func:`batch_spec`;
    the step's ``out_shardings`` keep the state where it is, and it donates the state when
    ``donate`` is set, as the unsharded step does.

    Args:
        fn: The plain step.
        key: What identifies the program besides the mesh (workload, optimizer, size, dtype).
        state0: The unsharded state.
        batch: The unsharded batch.
        text: The ``mesh`` parameter (not ``none``).
        donate: Donate the state (``donate_argnums=0``).

    Returns:
        ``(step, state, batch, state shardings, metrics)``: the state and batch placed on the
        mesh; metrics ``mesh`` (:func:`mesh_facts`), ``devices`` and ``partition_specs`` of a
        weight, a bias and the batch.

    Raises:
        jaxbench.workloads.base.NotApplicable: Fewer devices than the mesh spans.
    """
    import jax
    import numpy as np

    named, spec = jax.sharding.NamedSharding, jax.sharding.PartitionSpec
    axes = parse_mesh(text)
    mesh = make_mesh(axes)
    state_sh = jax.tree.map(lambda leaf: named(mesh, leaf_spec(np.ndim(leaf), axes)), state0)
    batch_sh = jax.tree.map(lambda leaf: named(mesh, batch_spec(axes, np.ndim(leaf))), batch)
    full = (*key, text, tuple(int(d.id) for d in mesh.devices.flat), donate)
    if full not in _JITTED:
        _JITTED[full] = jax.jit(fn, out_shardings=(state_sh, named(mesh, spec())),
                                donate_argnums=(0,) if donate else ())  # fmt: skip
    facts = {
        "mesh": mesh_facts(mesh),
        "devices": int(mesh.size),
        "partition_specs": {"weights": str(leaf_spec(2, axes)), "biases": str(leaf_spec(1, axes)),
                            "batch": str(batch_spec(axes))},
    }  # fmt: skip
    placed = jax.device_put(state0, state_sh), jax.device_put(batch, batch_sh)
    return _JITTED[full], *placed, state_sh, facts


def check_kept(state: Any, shardings: Any) -> None:
    """Raise ``GateFailure`` naming the first leaf of ``state`` that left its sharding."""
    import jax

    from jaxbench.workloads.base import GateFailure
    from jaxbench.workloads.trees import path_text

    leaves, _ = jax.tree_util.tree_flatten_with_path(state)
    for (path, leaf), want in zip(leaves, jax.tree.leaves(shardings), strict=True):
        if not leaf.sharding.is_equivalent_to(want, leaf.ndim):
            raise GateFailure(f"the stepped state's leaf {path_text(path, '/')} left its "
                              f"sharding {want.spec} for {leaf.sharding}")  # fmt: skip
