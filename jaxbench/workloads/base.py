"""What a workload hands to the harness: jitted callables, the timed unit, and its gate."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from jaxbench.measure.harness import CompileTarget
from jaxbench.tolerance import bound_ratio

TOLERANCES: dict[str, dict[str, float]] = {
    # float32: the acceptance bound of this project (rtol 1e-5, atol 1e-6).
    "float32": {"rtol": 1e-5, "atol": 1e-6},
    # bfloat16 has an 8-bit significand, so one rounding is a relative error up to 2**-8; fused
    # and unfused paths may round a few times differently: allow 2**-5.
    "bfloat16": {"rtol": 2.0**-5, "atol": 2.0**-5},
}


class GateFailure(RuntimeError):
    """A case failed its correctness gate; it is recorded as failed and not timed."""


class NotApplicable(RuntimeError):
    """A case does not apply (e.g. a Jacobian too large to form); it is recorded as skipped."""


@dataclass
class Built:
    """A case ready to measure.

    Attributes:
        targets: The jitted callables (with exact arguments) whose lowering and compile are timed.
        call: The timed unit, ``call(state) -> output PyTree``.
        make_state: Builds the initial argument PyTree of ``call``; run after compiling.
        check: The correctness gate; returns facts to record (tolerances, largest errors) and
            raises :class:`GateFailure`. Run after compiling and before any timing.
        next_state: ``(state, output) -> state`` where outputs feed the next call.
        metrics: Workload figures recorded with the result (e.g. held bytes).
    """

    targets: list[CompileTarget]
    call: Callable[[Any], Any]
    make_state: Callable[[], Any]
    check: Callable[[], dict[str, Any]]
    next_state: Callable[[Any, Any], Any] | None = None
    metrics: dict[str, Any] = field(default_factory=dict)


class Workload(Protocol):
    """A family of cases: a parameter grid and a builder."""

    name: str
    param_names: tuple[str, ...]

    def grid(self, quick: bool) -> dict[str, list[Any]]:
        """Default values per parameter: the quick grid or the full one."""
        ...

    def validate(self, params: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming the parameter if ``params`` is not a valid case."""
        ...

    def benchmark(self, params: Mapping[str, Any]) -> str:
        """Benchmark name for the record, e.g. ``forward/vmap_jvp``."""
        ...

    def build(self, params: Mapping[str, Any]) -> Built:
        """Build inputs and jitted callables on the default device."""
        ...


def meant_for(workload: Any, params: Mapping[str, Any]) -> str:
    """Where a case is meant to run, ``"cpu"`` or ``"gpu"``.

    The workload's own ``meant_for(params)`` where it has one (model-size families), else
    ``"cpu"``.
    """
    hint = getattr(workload, "meant_for", None)
    return hint(params) if hint is not None else "cpu"


def copy_tree(tree: Any) -> Any:
    """A copy of every array of ``tree``, for a call that donates its arguments."""
    import jax
    import jax.numpy as jnp

    return jax.tree.map(jnp.copy, tree)


def check_loss_lowered(step: Any, stepped_state: Any, batch: Any, before: float) -> float:
    """The loss at ``stepped_state`` (one more call of ``step``, which may donate it).

    Raises:
        GateFailure: It is not below ``before``, the loss the step started from.
    """
    after = float(step(stepped_state, batch)[1])
    if not after < before:
        raise GateFailure(f"one step did not lower the loss ({before:.6g} -> {after:.6g})")
    return after


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    """Raise ``ValueError`` naming parameter ``name`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose from {', '.join(choices)}")


def check_int(name: str, value: Any, low: int, high: int) -> int:
    """``value``, or ``ValueError`` naming ``name`` unless it is an int in ``[low, high]``.

    A ``bool`` is not an int here.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return value


def parse_int_param(name: str, text: str, ints: tuple[str, ...]) -> Any:
    """``--param NAME=VALUE`` text: an ``int`` for the parameters in ``ints``, else the text.

    Raises:
        ValueError: A parameter of ``ints`` whose text is not an integer (naming ``--param``).
    """
    if name not in ints:
        return text
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--param {name}={text!r}: expected an integer") from None


def check_close(
    name: str, got: Any, want: Any, dtype: str, tolerance: Mapping[str, float] | None = None
) -> dict[str, float]:
    """Compare two PyTrees leaf by leaf with the dtype's tolerance from :data:`TOLERANCES`.

    The rule is :func:`jaxbench.tolerance.bound_ratio`'s (``atol`` in units of
    ``max(1, max |want leaf|)``). ``tolerance`` (``{"rtol", "atol"}``) replaces the dtype's
    where a workload derives its own (e.g. from the rounding of a long float32 sum).

    Returns:
        ``{"rtol", "atol", "max_abs_err"}`` to record (``atol`` unscaled).

    Raises:
        GateFailure: Structures differ, a leaf is not finite, or a leaf is not ``allclose``.
    """
    import jax
    import numpy as np

    tol = dict(tolerance) if tolerance is not None else TOLERANCES[dtype]
    got_leaves, got_tree = jax.tree.flatten(got)
    want_leaves, want_tree = jax.tree.flatten(want)
    if got_tree != want_tree:
        raise GateFailure(f"{name}: PyTree structures differ: {got_tree} vs {want_tree}")
    worst = 0.0
    for i, (a, b) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            raise GateFailure(f"{name}: leaf {i} has shape {a.shape}, expected {b.shape}")
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise GateFailure(f"{name}: leaf {i} is not finite")
        if a.size:
            worst = max(worst, float(np.max(np.abs(a - b))))
        scale, ratio = bound_ratio(a, b, tol["rtol"], tol["atol"])
        if ratio > 1:
            raise GateFailure(
                f"{name}: leaf {i} differs beyond rtol={tol['rtol']:g}, "
                f"atol={tol['atol']:g} x {scale:.3g} "
                f"(max abs error {float(np.max(np.abs(a - b))):.3g})"
            )
    return {"rtol": tol["rtol"], "atol": tol["atol"], "max_abs_err": worst}
