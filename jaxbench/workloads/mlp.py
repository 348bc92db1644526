"""A plain MLP as pure functions over a PyTree of params: init, forward, MSE loss, train steps.

Params are a list with one ``{"w": (m, n), "b": (n,)}`` dict per layer. Hidden layers use tanh.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

Params = list[dict[str, jax.Array]]
Batch = tuple[jax.Array, jax.Array]


class BatchShapeError(ValueError):
    """A batch does not match the params: wrong shape or dtype. The message gives the expected."""


def init(key: jax.Array, sizes: Sequence[int], dtype: Any = jnp.float32) -> Params:
    """Initialise an MLP with LeCun-normal weights and zero biases.

    Args:
        key: A PRNG key; split once per layer, each subkey used for one draw only.
        sizes: Feature sizes of every layer boundary, input first, e.g. ``(32, 64, 64, 8)``.
        dtype: Parameter dtype.

    Returns:
        ``len(sizes) - 1`` layers; weights ``(m, n)`` drawn from N(0, 1/m) (LeCun et al.,
        "Efficient BackProp", 1998), biases ``(n,)`` zeros.

    Raises:
        ValueError: Fewer than two sizes, or a size below 1.
    """
    if len(sizes) < 2 or min(sizes) < 1:
        raise ValueError(f"sizes must be >= 2 positive ints, got {tuple(sizes)!r}")
    # One compiled program instead of a few eager ops per layer (each an XLA compile in a
    # fresh process: most of a case's set-up time, paid again by every asv benchmark process).
    return _init(key, tuple(sizes), jnp.dtype(dtype))


@functools.partial(jax.jit, static_argnums=(1, 2))
def _init(key: jax.Array, sizes: tuple[int, ...], dtype: Any) -> Params:
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        {
            "w": (jax.random.normal(k, (m, n), jnp.float32) / jnp.sqrt(m)).astype(dtype),
            "b": jnp.zeros((n,), dtype),
        }
        for k, m, n in zip(keys, sizes[:-1], sizes[1:], strict=True)
    ]


def init_host(seed: int, sizes: Sequence[int], dtype: Any = jnp.float32) -> Params:
    """:func:`init`'s distribution drawn by numpy's seeded generator on the host, then put.

    LeCun-normal weights ``(m, n)`` from N(0, 1/m) drawn in float32, then cast to ``dtype``;
    zero biases. Nothing is compiled (no PRNG key, no jitted init), so a fresh process builds
    its inputs without XLA; the values differ from :func:`init`'s for the same seed.

    Raises:
        ValueError: Fewer than two sizes, or a size below 1.
    """
    import numpy as np

    if len(sizes) < 2 or min(sizes) < 1:
        raise ValueError(f"sizes must be >= 2 positive ints, got {tuple(sizes)!r}")
    rng = np.random.default_rng(seed)
    dtype = jnp.dtype(dtype)
    layers = [
        {
            "w": (rng.standard_normal((m, n), np.float32) / np.float32(np.sqrt(m))).astype(dtype),
            "b": np.zeros((n,), dtype),
        }
        for m, n in itertools.pairwise(sizes)
    ]
    return jax.device_put(layers)


def forward(params: Params, x: jax.Array) -> jax.Array:
    """Apply the MLP: ``x`` of ``(batch, d_in)`` -> ``(batch, d_out)``, tanh between layers."""
    for layer in params[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    last = params[-1]
    return x @ last["w"] + last["b"]


def check_batch(params: Params, batch: Batch) -> None:
    """Check a batch ``(x, y)`` against the params at trace time (costs nothing once compiled).

    Raises:
        BatchShapeError: ``x`` is not ``(B, d_in)`` or ``y`` not ``(B, d_out)`` of the params'
            dtype; the message names the expected shape and dtype.
    """
    d_in, d_out = params[0]["w"].shape[0], params[-1]["w"].shape[1]
    dtype = params[0]["w"].dtype
    x, y = batch
    rows = x.shape[0] if x.ndim >= 1 else None
    for name, arr, want in (("x", x, (rows, d_in)), ("y", y, (rows, d_out))):
        if arr.ndim != 2 or tuple(arr.shape) != want or arr.dtype != dtype:
            raise BatchShapeError(
                f"batch {name} has shape {tuple(arr.shape)} and dtype {arr.dtype}; expected "
                f"shape {want} (batch, {'d_in' if name == 'x' else 'd_out'}) and dtype {dtype}"
            )


def loss(params: Params, batch: Batch) -> jax.Array:
    """Mean squared error of ``forward(params, x)`` against ``y``, accumulated in float32."""
    check_batch(params, batch)
    x, y = batch
    err = forward(params, x).astype(jnp.float32) - y.astype(jnp.float32)
    return jnp.mean(err**2)


def sgd_step(params: Params, batch: Batch, lr: float = 0.05) -> tuple[Params, jax.Array]:
    """One SGD step: ``(params - lr * grad, loss at params)``; params keep their dtype."""
    value, grads = jax.value_and_grad(loss)(params, batch)
    new = jax.tree.map(lambda p, g: (p - lr * g).astype(p.dtype), params, grads)
    return new, value


class AdamState(NamedTuple):
    """Params and optax Adam state, threaded through :func:`adam_step`."""

    params: Params
    opt_state: Any


@functools.cache
def adam(lr: float = 1e-3) -> Any:
    """The optax Adam transformation (Kingma and Ba, 2015); needs the ``optax`` extra.

    Raises:
        ModuleNotFoundError: optax is not installed (``pip install 'jaxbench[optax]'``).
    """
    try:
        import optax
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            "optimizer 'adam' needs optax: pip install 'jaxbench[optax]'"
        ) from exc
    return optax.adam(lr)


def adam_init(params: Params, lr: float = 1e-3) -> AdamState:
    """Initial :class:`AdamState` for ``params``."""
    return AdamState(params, adam(lr).init(params))


def adam_step(state: AdamState, batch: Batch, lr: float = 1e-3) -> tuple[AdamState, jax.Array]:
    """One optax Adam step: ``(new state, loss at the old params)``."""
    import optax

    value, grads = jax.value_and_grad(loss)(state.params, batch)
    updates, opt_state = adam(lr).update(grads, state.opt_state, state.params)
    return AdamState(optax.apply_updates(state.params, updates), opt_state), value


def make_batch(key: jax.Array, batch: int, d_in: int, d_out: int, dtype: Any) -> Batch:
    """A synthetic regression batch: ``x ~ N(0, 1)`` ``(batch, d_in)``, ``y`` ``(batch, d_out)``.

    ``y`` is ``sin`` of a fixed random projection of ``x``, so one descent step lowers the loss.
    """
    return _make_batch(key, batch, d_in, d_out, jnp.dtype(dtype))


def make_batch_host(seed: int, batch: int, d_in: int, d_out: int, dtype: Any) -> Batch:
    """:func:`make_batch`'s construction by numpy's seeded generator on the host, then put.

    Like :func:`init_host`, nothing is compiled; the values differ from :func:`make_batch`'s.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, d_in), np.float32)
    proj = rng.standard_normal((d_in, d_out), np.float32) / np.float32(np.sqrt(d_in))
    dtype = jnp.dtype(dtype)
    return jax.device_put((x.astype(dtype), np.sin(x @ proj).astype(dtype)))


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _make_batch(key: jax.Array, batch: int, d_in: int, d_out: int, dtype: Any) -> Batch:
    kx, kp = jax.random.split(key)
    x = jax.random.normal(kx, (batch, d_in), jnp.float32)
    proj = jax.random.normal(kp, (d_in, d_out), jnp.float32) / jnp.sqrt(d_in)
    return x.astype(dtype), jnp.sin(x @ proj).astype(dtype)
