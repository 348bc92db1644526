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

- ``transformer``: ``loss`` (scalar, float32), ``logits`` ``(B, T, V)`` float32 and
  ``grad.<path>`` (float32, like the master weights) of the ``tiny`` decoder LM computing in the
  set's dtype (:func:`jaxbench.workloads.lm.loss` under ``jax.value_and_grad``). Not the AdamW
  update: its first step moves each weight by about ``lr * sign(gradient)``, so a gradient within
  rounding of zero may move it either way, a difference of ``2 lr`` that says nothing of drift.

Every function takes the set's inputs, its dtype (the compute dtype; the MLP, loop and scatter
functions compute in their inputs' dtype, which is the set's) and the device. A wrong-shape input
raises the workload's own error from these same calls, at trace time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxbench.drift.sets import LM_SIZE, unflatten_params
from jaxbench.drift.trees import flatten_tree, unflatten_like
from jaxbench.workloads import forward_mode, lm, loops, mlp, scatter, train_step
from jaxbench.workloads.transformer import get_lm_size

Outputs = dict[str, np.ndarray]


@functools.cache
def _value_and_grad() -> Any:
    return jax.jit(jax.value_and_grad(mlp.loss))


def _device_tree(tree: Any, device: Any | None) -> Any:
    return jax.tree.map(lambda a: jax.device_put(jnp.asarray(a), device), tree)


def _host(tree: Any) -> Any:
    return jax.tree.map(np.asarray, jax.device_get(tree))


def train_step_outputs(
    inputs: dict[str, np.ndarray], dtype: str, device: Any | None = None
) -> Outputs:
    """Loss, gradients and params after one SGD step of ``train_step``.

    Args:
        inputs: ``params.<layer>.<w|b>``, ``x`` ``(B, d_in)`` and ``y`` ``(B, d_out)``.
        dtype: The set's dtype, the inputs' (the computation's).
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
    return out | flatten_tree(grads, "grad") | flatten_tree(after, "params_after")


def forward_outputs(
    inputs: dict[str, np.ndarray], dtype: str, device: Any | None = None
) -> Outputs:
    """Primal output and K JVPs w.r.t. the input, by ``jax.jvp`` and by ``jax.linearize``.

    Args:
        inputs: ``params.<layer>.<w|b>``, ``x`` ``(B, d_in)`` (the linearization point) and
            ``tangents`` ``(K, B, d_in)``.
        dtype: The set's dtype, the inputs' (the computation's).
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


def loop_outputs(inputs: dict[str, np.ndarray], dtype: str, device: Any | None = None) -> Outputs:
    """The buffer, its gradient and its tangent for each body of :data:`LOOP_BODIES`.

    Args:
        inputs: ``x`` ``(T, 64)``, the primal ``w`` and the tangent ``v`` ``(64,)``.
        dtype: The set's dtype, the inputs' (the computation's).
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


def scatter_outputs(
    inputs: dict[str, np.ndarray], dtype: str, device: Any | None = None
) -> Outputs:
    """The output of every scatter op on the set's inputs.

    Args:
        inputs: ``table`` ``(rows, 64)``, ``idx`` ``(n,)`` int32 and ``updates`` ``(n, 64)``.
        dtype: The set's dtype, the inputs' (the computation's).
        device: The ``jax.Device`` to compute on; ``None`` for the default.

    Returns:
        One array per op of :data:`jaxbench.workloads.scatter.OPS`, in ``table``'s dtype; host
        numpy arrays.

    Raises:
        jaxbench.workloads.scatter.ScatterShapeError: ``updates`` is not ``(n, 64)``.
    """
    args = [_device_tree(inputs[k], device) for k in ("table", "idx", "updates")]
    return {op: np.asarray(jax.device_get(scatter.jitted(op)(*args))) for op in scatter.OPS}


@functools.cache
def _lm_value_and_grad(n_heads: int, dtype: str) -> Any:
    def loss(params: Any, tokens: jax.Array) -> jax.Array:
        return lm.loss(params, tokens, n_heads, jnp.dtype(dtype))

    def logits(params: Any, tokens: jax.Array) -> jax.Array:
        return lm.forward(params, tokens[:, :-1], n_heads, jnp.dtype(dtype))

    return jax.jit(jax.value_and_grad(loss)), jax.jit(logits)


def transformer_outputs(
    inputs: dict[str, np.ndarray], dtype: str, device: Any | None = None
) -> Outputs:
    """Loss, logits and gradients of the ``tiny`` decoder LM on a token batch.

    Args:
        inputs: ``params.<path>`` (float32 master weights of :data:`~jaxbench.drift.sets.
            LM_SIZE`) and ``tokens`` ``(B, T + 1)`` int32.
        dtype: The compute dtype (``float32``, ``bfloat16``; ``float64`` for an exact reference
            with ``jax_enable_x64`` and :data:`jaxbench.workloads.lm.WIDE` widened).
        device: The ``jax.Device`` to compute on; ``None`` for the default.

    Returns:
        ``loss`` ``()``, ``logits`` ``(B, T, V)`` and ``grad.<path>`` shaped like the params;
        host numpy arrays.

    Raises:
        jaxbench.workloads.lm.TokenShapeError: ``tokens`` has the wrong shape or dtype.
        ValueError: A parameter of the model is missing from ``inputs``.
    """
    size = get_lm_size(LM_SIZE)
    template = jax.eval_shape(lambda key: lm.init(key, size), jax.random.key(0))
    params = _device_tree(unflatten_like(template, inputs, "params"), device)
    tokens = _device_tree(inputs["tokens"], device)
    value_and_grad, logits = _lm_value_and_grad(size.n_heads, dtype)
    loss, grads = value_and_grad(params, tokens)
    out = {"loss": np.asarray(jax.device_get(loss))}
    out["logits"] = np.asarray(jax.device_get(logits(params, tokens)))
    return out | flatten_tree(grads, "grad")


#: The output function of each workload; the check looks them up here.
COMPUTE: dict[str, Callable[..., Outputs]] = {
    "train_step": train_step_outputs,
    "forward": forward_outputs,
    "loop": loop_outputs,
    "scatter": scatter_outputs,
    "transformer": transformer_outputs,
}
