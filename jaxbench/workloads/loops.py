"""Workload: loops that write one slice of a buffer per step, swept over the trip count.

Each step advances a carried state ``h_t = tanh(w * h_{t-1} + x_t)`` (``width`` float32
elements, ``h_0 = 0``, ``w`` the primal, ``x`` of shape ``(trip, width)``) and writes ``h_t``
into row ``t`` of a ``(trip, width)`` buffer, in one of four ways (``body``; its aliases in
:data:`BODY_ALIASES`):

- ``at_set``: ``jax.lax.fori_loop`` with ``buf.at[t].set(h)``;
- ``dynamic_update_slice`` (``dus``): ``fori_loop`` with ``jax.lax.dynamic_update_slice``;
- ``scan_stack`` (``scan``): ``jax.lax.scan`` emitting ``h`` as its stacked output;
- ``shift``: ``fori_loop`` that shifts the whole buffer up one row and appends ``h``: a full
  copy per step, so quadratic in the trip count on purpose (the known exponent 2 of the scaling
  tests); not in the grids, select it with ``--param body=shift``.

The first three update the buffer in place when XLA keeps the loop's buffer aliased: their
latency is linear in the trip count (scaling exponent 1), and a JAX version that starts copying
the buffer shows as an exponent near 2 (:mod:`jaxbench.inference.scaling`). The row ``width``
(:data:`WIDTHS`) reaches narrow rows: a JAX version that is slow only on loops over rows of 1 to
16 elements (jax-ml/jax#40101, JAX 0.11.1 on the CPU) shows at ``width=1`` and not at the
default 64. Each body is timed
``mode``:

- ``plain``: the buffer;
- ``grad``: ``jax.grad`` of the buffer's sum with respect to ``w`` (the loop run backwards);
- ``linearize``: the JVP in one tangent direction of ``w``, applying the linear function made
  once by ``jax.linearize`` before timing (its residuals: ``held_bytes``).

The gate compares every mode with a float64 NumPy recurrence (the buffer, its gradient by the
reverse recurrence, its tangent by the forward one), and checks that a ``w`` of the wrong shape
raises :class:`LoopShapeError`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxbench.measure.harness import CompileTarget
from jaxbench.workloads.base import (
    AsvSuite,
    GateFailure,
    Workload,
    check_choice,
    check_close,
    check_int,
)
from jaxbench.workloads.regression import DriftSets, Inputs, host, on_device, row_variant
from jaxbench.workloads.step import Step

BODIES = ("at_set", "dynamic_update_slice", "scan_stack", "shift")
#: Other names accepted for a body (``--param body=dus``): alias -> body.
BODY_ALIASES = {"dus": "dynamic_update_slice", "scan": "scan_stack"}
MODES = ("plain", "grad", "linearize")
#: The default width of the carried state and of one buffer row (float32 elements): the only
#: width of the drift sets and of records made before ``width`` was a parameter.
WIDTH = 64
#: The row widths of the full grid (float32 elements).
WIDTHS = (1, 4, 16, 64)
WIDTH_MAX = 1 << 16
TRIP_MAX = 1 << 20
#: Scale of ``w``: below 1, so the recurrence is contractive and float32 stays within 1e-5.
W_SCALE = 0.5


class LoopShapeError(ValueError):
    """``w`` or ``x`` does not have the loop's shape; the message gives the expected one."""


def run(body: str, x: jax.Array, w: jax.Array) -> jax.Array:
    """The ``(trip, width)`` buffer of ``h_1 .. h_trip`` written by ``body``.

    Raises:
        LoopShapeError: ``x`` is not 2-D, or ``w`` is not ``(x.shape[1],)`` (at trace time).
        ValueError: Unknown ``body``.
    """
    if x.ndim != 2 or w.shape != (x.shape[-1],):
        raise LoopShapeError(
            f"w has shape {tuple(w.shape)} and x {tuple(x.shape)}; expected w (width,) and x "
            "(trip, width)"
        )
    h0 = jnp.zeros_like(w)

    def advance(h: jax.Array, x_t: jax.Array) -> jax.Array:
        return jnp.tanh(w * h + x_t)

    if body == "scan_stack":
        return jax.lax.scan(lambda h, x_t: (advance(h, x_t),) * 2, h0, x)[1]
    writes: dict[str, Callable[[jax.Array, jax.Array, Any], jax.Array]] = {
        "at_set": lambda buf, h, t: buf.at[t].set(h),
        "dynamic_update_slice": lambda buf, h, t: jax.lax.dynamic_update_slice(
            buf, h[None], (t, 0)
        ),
        "shift": lambda buf, h, t: jnp.concatenate([buf[1:], h[None]]),
    }
    check_choice("body", body, BODIES, BODY_ALIASES)
    write = writes[body]

    def step(t: Any, carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        h, buf = carry
        h = advance(h, x[t])
        return h, write(buf, h, t)

    return jax.lax.fori_loop(0, x.shape[0], step, (h0, jnp.zeros_like(x)))[1]


def _loss(body: str, x: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.sum(run(body, x, w))


def _linearize(body: str, x: jax.Array, w: jax.Array) -> tuple[jax.Array, Any]:
    return jax.linearize(functools.partial(run, body, x), w)


def _apply(f_lin: Any, v: jax.Array) -> jax.Array:
    return f_lin(v)


@functools.cache
def jitted(body: str) -> dict[str, Any]:
    """The jitted callables of one body (cached, so a rebuilt case reuses its programs)."""
    return {
        "plain": jax.jit(functools.partial(run, body)),
        "grad": jax.jit(jax.grad(functools.partial(_loss, body), argnums=1)),
        "linearize": jax.jit(functools.partial(_linearize, body)),
        "apply": jax.jit(_apply),
    }


def reference(x: np.ndarray, w: np.ndarray, v: np.ndarray) -> dict[str, np.ndarray]:
    """The buffer, ``d sum(buffer) / dw`` and the tangent along ``v``, in float64 NumPy.

    Forward: ``h_t = tanh(w h_{t-1} + x_t)``, tangent ``dh_t = (1 - h_t^2)(w dh_{t-1} + v
    h_{t-1})``. Reverse: ``g_t = 1 + g_{t+1} (1 - h_{t+1}^2) w`` (``dL/dh_t``), and
    ``dL/dw = sum_t g_t (1 - h_t^2) h_{t-1}``.
    """
    x, w, v = (np.asarray(a, dtype=np.float64) for a in (x, w, v))
    trip = x.shape[0]
    h = np.zeros((trip + 1, w.size))
    dh = np.zeros_like(h)
    for t in range(trip):
        h[t + 1] = np.tanh(w * h[t] + x[t])
        dh[t + 1] = (1 - h[t + 1] ** 2) * (w * dh[t] + v * h[t])
    grad, g = np.zeros_like(w), np.zeros_like(w)
    for t in range(trip, 0, -1):
        g = 1 + (g * (1 - h[t + 1] ** 2) * w if t < trip else 0)
        grad += g * (1 - h[t] ** 2) * h[t - 1]
    return {"plain": h[1:], "grad": grad, "linearize": dh[1:]}


def inputs(trip: int, width: int = WIDTH) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The seeded float32 inputs of a case: ``x``, the primal ``w`` and a tangent ``v``.

    ``x`` ``(trip, width)`` ~ N(0, 1); ``w`` ``(width,)`` ~ U(-:data:`W_SCALE`, :data:`W_SCALE`);
    ``v`` ``(width,)`` ~ N(0, 1).
    """
    key_x, key_w, key_v = jax.random.split(jax.random.key(2), 3)
    x = jax.random.normal(key_x, (trip, width), jnp.float32)
    w = W_SCALE * jax.random.uniform(key_w, (width,), jnp.float32, -1.0, 1.0)
    return x, w, jax.random.normal(key_v, (width,), jnp.float32)


#: Steps of the drift sets: a recurrence of 64 steps and a gradient summed over 64 terms, the
#: reduction length the float32 drift tolerance is derived for.
DRIFT_TRIP = 64
#: The bodies the drift sets compute: an in-place ``fori_loop`` and a stacking ``scan``.
DRIFT_BODIES = ("at_set", "scan_stack")


def drift_standard(dtype: str) -> Inputs:
    """The drift sets' standard inputs: the seeded inputs at :data:`DRIFT_TRIP` steps.

    :func:`inputs`: ``x`` ``(64, 64)``, the primal ``w`` and a tangent ``v`` ``(64,)``, float32
    (the family's one dtype).
    """
    return {k: np.asarray(a) for k, a in zip("xwv", inputs(DRIFT_TRIP), strict=True)}


def drift_variant(name: str, std: Inputs) -> Inputs:
    """A drift set from the standard inputs: the steps of ``x`` varied.

    :func:`~jaxbench.workloads.regression.row_variant` (tanh saturates on the boundary steps,
    its derivative exactly 0 there); ``invalid_shape`` drops the last element of ``w``.
    """
    out = row_variant(name, std)
    if name == "invalid_shape":
        out["w"] = std["w"][:-1]
    return out


def drift_outputs(inputs: Inputs, dtype: str, device: Any | None = None) -> Inputs:
    """The buffer, its gradient and its tangent for each body of :data:`DRIFT_BODIES`.

    Args:
        inputs: ``x`` ``(T, 64)``, the primal ``w`` and the tangent ``v`` ``(64,)``.
        dtype: The set's dtype, the inputs' (the computation's).
        device: The ``jax.Device`` to compute on; ``None`` for the default.

    Returns:
        ``plain.<body>`` and ``linearize.<body>`` ``(T, 64)``, ``grad.<body>`` ``(64,)`` (of the
        buffer's sum with respect to ``w``), in ``x``'s dtype; host numpy arrays (the jitted
        ``plain``, ``grad``, ``linearize`` and ``apply``).

    Raises:
        LoopShapeError: ``w`` is not ``(x.shape[1],)``.
    """
    x, w, v = (on_device(inputs[k], device) for k in ("x", "w", "v"))
    out = {}
    for body in DRIFT_BODIES:
        fns = jitted(body)
        out[f"plain.{body}"] = host(fns["plain"](x, w))
        out[f"grad.{body}"] = host(fns["grad"](x, w))
        out[f"linearize.{body}"] = host(fns["apply"](fns["linearize"](x, w)[1], v))
    return out


def loop(
    trip: int = 64,
    body: str = "at_set",
    mode: str = "plain",
    width: int = WIDTH,
    dtype: str = "float32",
) -> Step:
    """The family's factory: ``x``, ``w`` and a tangent ``v``, the mode's timed call, the gate.

    Args:
        trip: The trip count, 1 to :data:`TRIP_MAX`.
        body: One of :data:`BODIES`.
        mode: One of :data:`MODES`; ``linearize`` times the application of a linearization
            made untimed by ``make_args``.
        width: Row width, float32 elements; :data:`WIDTH` for records made before it was a
            parameter.
        dtype: ``float32`` only.

    Returns:
        A :class:`~jaxbench.workloads.step.Step` gated against the float64 recurrence
        (:func:`reference`).
    """
    x, w, v = inputs(trip, width)
    fns = jitted(body)
    key = (body, trip, width)
    metrics: dict[str, Any] = {"held_bytes": 0, "buffer_bytes": trip * width * 4}
    if mode == "linearize":
        lin = fns["linearize"]
        programs = (
            CompileTarget("linearize", ("linearize", *key), lin, (x, w), 0),
            CompileTarget("apply", ("apply", *key), fns["apply"],
                          lambda: (jax.eval_shape(lin, x, w)[1], v)),
        )  # fmt: skip
        f_lin = jax.eval_shape(lin, x, w)[1]
        metrics["held_bytes"] = sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(f_lin))
        fn = fns["apply"]

        def make_args() -> Any:
            return (lin(x, w)[1], v)
    else:
        fn = fns[mode]
        programs = (CompileTarget(mode, (mode, *key), fn, (x, w)),)

        def make_args() -> Any:
            return (x, w)

    def gate() -> dict[str, Any]:
        return _gate(body, mode, fn(*make_args()), x, w, v)

    return Step(fn=fn, args=(x, w), programs=programs, make_args=make_args, gate=gate,
                metrics=metrics)  # fmt: skip


def _gate(body: str, mode: str, got: Any, x: Any, w: Any, v: Any) -> dict[str, Any]:
    """The jitted result against the float64 recurrence; a wrong ``w`` shape must raise."""
    try:
        jitted(body)["plain"](x, w[:-1])
    except LoopShapeError:
        pass
    else:
        raise GateFailure("a w of the wrong shape did not raise LoopShapeError")
    want = reference(np.asarray(x), np.asarray(w), np.asarray(v))[mode]
    return check_close(f"loop/{body} {mode} (jit vs float64 recurrence)", got, want, "float32")


class Loops(Workload):
    """In-place buffer updates under ``fori_loop`` and ``scan``, plain, under grad, linearized.

    Parameters: ``trip`` (the trip count, 1..:data:`TRIP_MAX`), ``body`` (:data:`BODIES`, or
    an alias of :data:`BODY_ALIASES`), ``mode`` (:data:`MODES`), ``width`` (the row width,
    1..:data:`WIDTH_MAX` float32 elements), ``dtype`` (``float32``).
    """

    name = "loop"
    factory = staticmethod(loop)
    param_names = ("trip", "body", "mode", "width", "dtype")
    choices: Mapping[str, tuple[str, ...]] = {"body": BODIES, "mode": MODES}
    aliases: Mapping[str, Mapping[str, str]] = {"body": BODY_ALIASES}
    drift = DriftSets(
        ("float32",), DRIFT_TRIP, LoopShapeError, drift_standard, drift_variant, drift_outputs
    )
    asv = (
        AsvSuite("Loop", {"trip": [256, 1024, 4096], "body": ["at_set", "scan_stack"],
                          "mode": list(MODES)}, {"width": WIDTH, "dtype": "float32"},
                 method="time_loop", module="bench_loops"),
        AsvSuite("LoopWidth", {"width": list(WIDTHS), "body": ["at_set", "scan_stack"]},
                 {"trip": 1024, "mode": "plain", "dtype": "float32"}, method="time_loop",
                 module="bench_loops"),
    )  # fmt: skip

    def grid(self, quick: bool) -> dict[str, list[Any]]:
        """Quick: ``at_set`` plain, trips 64 to 1024, rows of 1 and 64 elements.

        Full: the in-place bodies, to 4096, every width of :data:`WIDTHS`.
        """
        if quick:
            return {"trip": [64, 256, 1024], "body": ["at_set"], "mode": ["plain"],
                    "width": [1, WIDTH], "dtype": ["float32"]}  # fmt: skip
        return {"trip": [256, 1024, 4096], "body": list(BODIES[:3]), "mode": list(MODES),
                "width": list(WIDTHS), "dtype": ["float32"]}  # fmt: skip

    def validate(self, params: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming a bad ``trip``, ``body``, ``mode``, ``width`` or ``dtype``.

        The ``body`` message lists the aliases too. A case without ``width`` (a record made
        before it was a parameter) has rows of :data:`WIDTH`.
        """
        check_int("trip", params["trip"], 1, TRIP_MAX)
        check_int("width", params.get("width", WIDTH), 1, WIDTH_MAX)
        check_choice("body", params["body"], BODIES, BODY_ALIASES)
        for name, choices in (("mode", MODES), ("dtype", ("float32",))):
            check_choice(name, params[name], choices)

    def benchmark(self, params: Mapping[str, Any]) -> str:
        """``loop/<body>``."""
        return f"{self.name}/{params['body']}"
