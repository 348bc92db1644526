"""The outputs of each workload on a regression set's inputs, computed with the workload's code.

- ``train_step``: ``loss`` (scalar, float32) and ``grad.<layer>.<w|b>`` from
  ``jax.jit(jax.value_and_grad(mlp.loss))``, and ``params_after.<layer>.<w|b>``: the params after
  one SGD step of the workload's own jitted step (:func:`~jaxbench.workloads.train_step.
  jitted_step`, ``sgd``, not donated). Gradients and params keep the params' dtype.
- ``forward``: at the linearization point ``x``, ``primal`` ``(B, d_out)`` (the primal output),
  ``jvp`` ``(K, B, d_out)``: ``J t_k`` for the K tangents by ``jax.jvp`` (the workload's jitted
  ``jvp``), and ``linearize`` ``(K, B, d_out)``: the same JVPs by one ``jax.linearize`` and K
  applications of its linear function (the workload's jitted ``linearize`` and ``apply``).
- ``loop``: for the bodies :data:`LOOP_BODIES` (an in-place ``fori_loop`` and a stacking
  ``scan``), ``plain.<body>`` the ``(T, 64)`` buffer, ``grad.<body>`` ``(64,)`` the gradient of
  its sum with respect to ``w``, ``linearize.<body>`` ``(T, 64)`` its tangent along ``v`` (the
  family's jitted ``plain``, ``grad``, ``linearize`` and ``apply``).
- ``scatter``: every op of :data:`jaxbench.workloads.scatter.OPS` on the set's table, indices
  and updates: ``scatter_add``, ``segment_sum`` and ``embedding_grad`` ``(rows, 64)``,
  ``gather`` ``(n, 64)`` (the family's jitted ops).

A wrong-shape input raises the workload's own error from these same calls, at trace time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxbench.drift.sets import flatten_params, unflatten_params
from jaxbench.workloads import forward_mode, loops, mlp, scatter, train_step

Outputs = dict[str, np.ndarray]


@functools.cache
def _value_and_grad() -> Any:
    return jax.jit(jax.value_and_grad(mlp.loss))


def _device_tree(tree: Any, device: Any | None) -> Any:
    return jax.tree.map(lambda a: jax.device_put(jnp.asarray(a), device), tree)


def _host(tree: Any) -> Any:
    return jax.tree.map(np.asarray, jax.device_get(tree))


def train_step_outputs(inputs: dict[str, np.ndarray], device: Any | None = None) -> Outputs:
    """Loss, gradients and params after one SGD step of ``train_step``.

    Args:
        inputs: ``params.<layer>.<w|b>``, ``x`` ``(B, d_in)`` and ``y`` ``(B, d_out)``.
        device: The ``jax.Device`` to compute on; ``None`` for the default.

    Returns:
        ``loss`` ``()`` float32, ``grad.<layer>.<w|b>`` and ``params_after.<layer>.<w|b>``
        shaped and typed like the params; host numpy arrays.

    Raises:
        jaxbench.workloads.mlp.BatchShapeError: ``x`` or ``y`` has the wrong shape or dtype.
    """
    params = _device_tree(unflatten_params(inputs), device)
    batch = _device_tree((inputs["x"], inputs["y"]), device)
    loss, grads = _value_and_grad()(params, batch)
    after, _ = train_step.jitted_step("sgd", False)(params, batch)
    out = {"loss": np.asarray(jax.device_get(loss))}
    for prefix, tree in (("grad", grads), ("params_after", after)):
        out |= {
            name.replace("params", prefix, 1): arr
            for name, arr in flatten_params(_host(tree)).items()
        }
    return out


def forward_outputs(inputs: dict[str, np.ndarray], device: Any | None = None) -> Outputs:
    """Primal output and K JVPs w.r.t. the input, by ``jax.jvp`` and by ``jax.linearize``.

    Args:
        inputs: ``params.<layer>.<w|b>``, ``x`` ``(B, d_in)`` (the linearization point) and
            ``tangents`` ``(K, B, d_in)``.
        device: The ``jax.Device`` to compute on; ``None`` for the default.

    Returns:
        ``primal`` ``(B, d_out)``, ``jvp`` and ``linearize`` ``(K, B, d_out)``, in the params'
        dtype; host numpy arrays.

    Raises:
        jaxbench.workloads.forward_mode.TangentShapeError: A tangent's shape or dtype is not the
            primal's.
    """
    fns = forward_mode.jitted("input")
    params = _device_tree(unflatten_params(inputs), device)
    x = _device_tree(inputs["x"], device)
    tangents = [_device_tree(t, device) for t in inputs["tangents"]]
    primal, jvps = None, []
    for t in tangents:
        primal, jvp_out = fns["jvp"](params, x, t)
        jvps.append(jvp_out)
    lin_primal, f_lin = fns["linearize"](params, x)
    lin = [fns["apply"](f_lin, t) for t in tangents]
    if primal is None:
        primal = lin_primal
    return {
        "primal": np.asarray(jax.device_get(primal)),
        "jvp": np.stack(_host(jvps)),
        "linearize": np.stack(_host(lin)),
    }


LOOP_BODIES = ("at_set", "scan_stack")


def loop_outputs(inputs: dict[str, np.ndarray], device: Any | None = None) -> Outputs:
    """The buffer, its gradient and its tangent for each body of :data:`LOOP_BODIES`.

    Args:
        inputs: ``x`` ``(T, 64)``, the primal ``w`` and the tangent ``v`` ``(64,)``.
        device: The ``jax.Device`` to compute on; ``None`` for the default.

    Returns:
        ``plain.<body>`` and ``linearize.<body>`` ``(T, 64)``, ``grad.<body>`` ``(64,)``, in
        ``x``'s dtype; host numpy arrays.

    Raises:
        jaxbench.workloads.loops.LoopShapeError: ``w`` is not ``(x.shape[1],)``.
    """
    x, w, v = (_device_tree(inputs[k], device) for k in ("x", "w", "v"))
    out = {}
    for body in LOOP_BODIES:
        fns = loops.jitted(body)
        out[f"plain.{body}"] = np.asarray(jax.device_get(fns["plain"](x, w)))
        out[f"grad.{body}"] = np.asarray(jax.device_get(fns["grad"](x, w)))
        f_lin = fns["linearize"](x, w)[1]
        out[f"linearize.{body}"] = np.asarray(jax.device_get(fns["apply"](f_lin, v)))
    return out


def scatter_outputs(inputs: dict[str, np.ndarray], device: Any | None = None) -> Outputs:
    """The output of every scatter op on the set's inputs.

    Args:
        inputs: ``table`` ``(rows, 64)``, ``idx`` ``(n,)`` int32 and ``updates`` ``(n, 64)``.
        device: The ``jax.Device`` to compute on; ``None`` for the default.

    Returns:
        One array per op of :data:`jaxbench.workloads.scatter.OPS`, in ``table``'s dtype; host
        numpy arrays.

    Raises:
        jaxbench.workloads.scatter.ScatterShapeError: ``updates`` is not ``(n, 64)``.
    """
    args = [_device_tree(inputs[k], device) for k in ("table", "idx", "updates")]
    return {op: np.asarray(jax.device_get(scatter.jitted(op)(*args))) for op in scatter.OPS}


#: The output function of each workload; the check looks them up here.
COMPUTE: dict[str, Callable[..., Outputs]] = {
    "train_step": train_step_outputs,
    "forward": forward_outputs,
    "loop": loop_outputs,
    "scatter": scatter_outputs,
}
