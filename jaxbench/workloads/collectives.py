"""Workload: one collective over a 1-D mesh of ``devices`` devices, swept over message sizes.

The timed unit is one ``jax.shard_map`` program over the mesh axis :data:`AXIS` whose body is a
single ``jax.lax`` collective (``op``):

- ``all_reduce``: ``lax.psum`` of each device's ``(1, S/4)`` float32 row;
- ``all_gather``: ``lax.all_gather`` (tiled) of each device's ``(1, S/(4n))`` row into ``(n,
  S/(4n))``;
- ``reduce_scatter``: ``lax.psum_scatter`` (tiled) of each device's ``(1, S/4)`` row: device
  ``i`` keeps chunk ``i`` of the sum;
- ``all_to_all``: ``lax.all_to_all`` (tiled): chunk ``j`` of device ``i``'s row goes to device
  ``j``, at position ``i``;
- ``permute``: ``lax.ppermute`` around a ring, device ``i`` to ``(i + 1) mod n``.

``bytes`` is the message size *S* as NVIDIA's nccl-tests define it per operation
(``doc/PERFORMANCE.md`` of github.com/NVIDIA/nccl-tests): the buffer each device reduces
(all-reduce), sends and receives (all-to-all, permute), receives in all (all-gather) or sends in
all (reduce-scatter). From the latency *t* of one call the analysis derives the algorithm
bandwidth ``algbw = S / t`` and the bus bandwidth ``busbw = algbw * f`` with nccl-tests'
factor *f* (:data:`BUS_FACTORS`: ``2(n-1)/n`` for all-reduce, ``(n-1)/n`` for all-gather,
reduce-scatter and all-to-all, 1 for a point-to-point permute, as their ``sendrecv``), so
``metrics`` carries ``message_bytes`` (*S*) and ``bus_factor`` (*f*)
(:func:`jaxbench.analysis.derived.record_figures`).

The input is placed with a ``NamedSharding`` over the mesh (one row per device) and stays there
through the timed calls; ``metrics["mesh"]`` records the mesh (axis names and sizes, device ids
and kinds) and ``metrics["partition_specs"]`` the argument's and output's specs. The gate
compares the output with a float64 NumPy reference of the collective and checks that the output
is still sharded over every device of the mesh.

In a program over several JAX processes (:mod:`jaxbench.distributed`) the mesh spans every
process's devices: each process places its own rows of the same input, and the gate gathers
the output from all of them before comparing it.

On a CPU, ``devices`` > 1 needs JAX started with
``XLA_FLAGS=--xla_force_host_platform_device_count=N``; a case with more devices than the
backend has is skipped (:class:`~jaxbench.workloads.base.NotApplicable`). Those are figures of
the code path through XLA's CPU collectives (memory copies in one process), not of an
interconnect.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np

from jaxbench.measure.harness import CompileTarget
from jaxbench.workloads.base import (
    GateFailure,
    Workload,
    check_choice,
    check_close,
    check_int,
)
from jaxbench.workloads.meshes import MAX_DEVICES, make_mesh, mesh_facts
from jaxbench.workloads.step import Step

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "permute")
#: The mesh's one axis name.
AXIS = "x"
#: Bytes of one float32 element.
ITEM = 4
#: Largest message size (bytes per device).
BYTES_MAX = 1 << 31


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor of ``op`` over ``n`` devices (``doc/PERFORMANCE.md``).

    ``2(n-1)/n`` for ``all_reduce``; ``(n-1)/n`` for ``all_gather``, ``reduce_scatter`` and
    ``all_to_all``; 1 for ``permute`` (a send and a receive per device, nccl-tests'
    ``sendrecv``).

    Raises:
        ValueError: Unknown ``op``, or ``n`` < 1.
    """
    check_choice("op", op, OPS)
    check_int("devices", n, 1, MAX_DEVICES)
    if op == "permute":
        return 1.0
    return (2.0 if op == "all_reduce" else 1.0) * (n - 1) / n


def input_shape(op: str, message_bytes: int, n: int) -> tuple[int, int]:
    """The global input's shape: one row per device, ``(n, S/4)``, or ``(n, S/(4n))`` to gather."""
    per_row = message_bytes // ITEM
    return (n, per_row // n) if op == "all_gather" else (n, per_row)


def body(op: str, n: int) -> Callable[[jax.Array], jax.Array]:
    """The per-device function of ``op`` on one ``(1, m)`` row (see the module docstring)."""
    lax = jax.lax
    if op == "all_reduce":
        return lambda row: lax.psum(row, AXIS)
    if op == "all_gather":
        return lambda row: lax.all_gather(row, AXIS, axis=0, tiled=True)
    if op == "reduce_scatter":
        return lambda row: lax.psum_scatter(row, AXIS, scatter_dimension=1, tiled=True)
    if op == "all_to_all":
        return lambda row: lax.all_to_all(row, AXIS, 1, 1, tiled=True)
    ring = [(i, (i + 1) % n) for i in range(n)]
    return lambda row: lax.ppermute(row, AXIS, perm=ring)


def reference(op: str, x: np.ndarray) -> np.ndarray:
    """``op`` of the global input ``x`` (``(n, m)``, row ``i`` on device ``i``) in float64.

    Returns:
        The global output: ``(n, m)``; ``(n * n, m)`` for ``all_gather``; ``(n, m / n)`` for
        ``reduce_scatter``.
    """
    x = np.asarray(x, np.float64)
    n, m = x.shape
    if op == "all_reduce":
        return np.broadcast_to(x.sum(0), (n, m)).copy()
    if op == "all_gather":
        return np.tile(x, (n, 1))
    if op == "reduce_scatter":
        return x.sum(0).reshape(n, m // n)
    if op == "all_to_all":
        return x.reshape(n, n, m // n).transpose(1, 0, 2).reshape(n, m)
    return np.roll(x, 1, axis=0)


def gathered(out: jax.Array) -> Any:
    """``out`` whole on this process: as it is, or gathered from every process holding a part."""
    if out.is_fully_addressable:
        return out
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(out, tiled=True)


@functools.cache
def jitted(op: str, mesh: jax.sharding.Mesh) -> Any:
    """The jitted ``shard_map`` of ``op`` over ``mesh`` (cached per op and mesh)."""
    spec = jax.sharding.PartitionSpec(AXIS)
    return jax.jit(jax.shard_map(body(op, mesh.size), mesh=mesh, in_specs=spec, out_specs=spec))


def collectives(
    op: str = "all_reduce", bytes: int = 1 << 20, devices: int = 2, dtype: str = "float32"
) -> Step:
    """The family's factory: the sharded input, the jitted collective and its gate.

    Args:
        op: One of :data:`OPS`.
        bytes: The nccl-tests message size *S*, a multiple of ``4 * devices`` (the records'
            parameter name).
        devices: The mesh's size.
        dtype: ``float32`` only.

    Returns:
        A :class:`~jaxbench.workloads.step.Step` whose output must stay sharded over the mesh
        and match a float64 NumPy reference, with ``message_bytes`` and ``bus_factor``
        (nccl-tests' definitions).

    Raises:
        jaxbench.workloads.base.NotApplicable: Fewer devices than ``devices``
            (:func:`jaxbench.workloads.meshes.mesh_devices`).
    """
    mesh = make_mesh({AXIS: devices})
    spec = jax.sharding.PartitionSpec(AXIS)
    sharding = jax.sharding.NamedSharding(mesh, spec)
    host = np.random.default_rng(7).standard_normal(input_shape(op, bytes, devices), np.float32)
    x = jax.device_put(host, sharding)
    fn = jitted(op, mesh)

    def gate() -> dict[str, Any]:
        out = fn(x)
        if len(out.sharding.device_set) != devices or not out.sharding.is_equivalent_to(
            sharding, out.ndim
        ):
            raise GateFailure(
                f"collectives/{op}: the output is not sharded {spec} over the {devices} "
                f"devices of the mesh (got {out.sharding})"
            )
        return check_close(f"collectives/{op} (jit vs float64 NumPy)", gathered(out),
                           reference(op, host), "float32")  # fmt: skip

    return Step(
        fn=fn,
        args=(x,),
        programs=(CompileTarget(op, (op, bytes, mesh), fn, (x,)),),
        make_args=lambda: (x,),
        gate=gate,
        metrics={
            "message_bytes": bytes,
            "bus_factor": bus_factor(op, devices),
            "mesh": mesh_facts(mesh),
            "partition_specs": {"input": str(spec), "output": str(spec)},
        },
    )


class Collectives(Workload):
    """One ``lax`` collective over a mesh of ``devices`` devices, ``bytes`` a message.

    Parameters: ``op`` (:data:`OPS`), ``bytes`` (the nccl-tests message size *S*, a multiple
    of ``4 * devices``), ``devices`` (the mesh's size), ``dtype`` (``float32``).
    """

    name = "collectives"
    factory = staticmethod(collectives)
    param_names = ("op", "bytes", "devices", "dtype")
    choices: Mapping[str, tuple[str, ...]] = {"op": OPS}

    def grid(self, quick: bool) -> dict[str, list[Any]]:
        """Quick: every op, 1 MiB, 2 devices. Full: 1 KiB to 64 MiB by 16x, 2, 4 and 8 devices."""
        if quick:
            return {"op": list(OPS), "bytes": [1 << 20], "devices": [2], "dtype": ["float32"]}
        return {"op": list(OPS), "bytes": [1 << k for k in range(10, 27, 4)],
                "devices": [2, 4, 8], "dtype": ["float32"]}  # fmt: skip

    def validate(self, params: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming a bad parameter (its name and what is allowed)."""
        check_choice("op", params["op"], OPS)
        n = check_int("devices", params["devices"], 1, MAX_DEVICES)
        size = check_int("bytes", params["bytes"], ITEM * n, BYTES_MAX)
        if size % (ITEM * n):
            raise ValueError(f"bytes must be a multiple of 4 x devices = {ITEM * n}, got "
                             f"bytes={size} with devices={n}; e.g. --param "
                             f"bytes={max(ITEM * n, size - size % (ITEM * n))}")  # fmt: skip
        check_choice("dtype", params["dtype"], ("float32",))

    def benchmark(self, params: Mapping[str, Any]) -> str:
        """``collectives/<op>``."""
        return f"{self.name}/{params['op']}"
