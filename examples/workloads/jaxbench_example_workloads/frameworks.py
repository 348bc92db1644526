"""Train steps of models written with Equinox and with Flax NNX, each an optional dependency.

Both follow the same recipe, which is how any module library reaches jaxbench: split the model
into its array leaves (the argument PyTree that is timed and donated) and the static rest, and
jit a pure step over the arrays. The library is imported inside the factory, so ``jaxbench
list`` shows these workloads without it, and running one without it is one line naming what to
install (``pip install 'jaxbench-example-workloads[equinox]'`` or ``[flax]``).
"""

from __future__ import annotations

import importlib
from typing import Any

import jax
import jax.numpy as jnp

from jaxbench.workloads import Step


def _need(module: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            f"this workload needs {extra}: pip install 'jaxbench-example-workloads[{extra}]'"
        ) from None


def _check(width: int, depth: int, batch: int, lr: float) -> None:
    for name, value in (("width", width), ("depth", depth), ("batch", batch)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if not 0 < lr < float("inf"):
        raise ValueError(f"lr must be a finite number > 0, got {lr}")


def _check_attention(d_model: int, heads: int, seq: int, batch: int, lr: float) -> None:
    _check(d_model, seq, batch, lr)
    if heads < 1 or d_model % heads:
        raise ValueError(f"heads must be >= 1 and divide d_model={d_model}, got {heads}")


def _data(width: int, batch: int) -> tuple[jax.Array, jax.Array]:
    x = jax.random.normal(jax.random.key(7), (batch, width))
    return x, jnp.sin(x)


def _mlp_flops(width: int, depth: int, batch: int) -> int:
    # depth + 1 square layers; 6 FLOP per weight and example (forward 2, backward 4).
    return 6 * batch * (depth + 1) * width * width


def equinox_mlp(width: int = 64, depth: int = 2, batch: int = 64, lr: float = 1e-3) -> Step:
    """One optax Adam step of an ``equinox.nn.MLP`` (``width`` wide, ``depth`` hidden layers).

    Arguments: the model's arrays and Adam's state (donated, fed to the next call), ``x`` and
    ``y`` ``(batch, width)`` float32. FLOP per call: ``6 * batch * (depth + 1) * width**2``.

    Raises:
        ModuleNotFoundError: Equinox (or optax) is not installed.
        ValueError: ``width``, ``depth`` or ``batch`` below 1, or ``lr`` not finite and > 0.
    """
    eqx = _need("equinox", "equinox")
    optax = _need("optax", "equinox")
    _check(width, depth, batch, lr)
    model = eqx.nn.MLP(width, width, width, depth, key=jax.random.key(0))
    arrays, static = eqx.partition(model, eqx.is_array)
    optimizer = optax.adam(lr)

    def loss(arrays: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        net = eqx.combine(arrays, static)
        return jnp.mean((jax.vmap(net)(x) - y) ** 2)

    def step(arrays: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
        value, grads = jax.value_and_grad(loss)(arrays, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, arrays)
        return optax.apply_updates(arrays, updates), opt_state, value

    return Step(
        fn=jax.jit(step, donate_argnums=(0, 1)),
        args=(arrays, optimizer.init(arrays), *_data(width, batch)),
        next_args=lambda args, out: (out[0], out[1], *args[2:]),
        reference=step,
        flops=_mlp_flops(width, depth, batch),
        tokens=batch,
    )


def nnx_mlp(width: int = 64, depth: int = 2, batch: int = 64, lr: float = 0.05) -> Step:
    """One SGD step of a Flax NNX MLP (``depth`` hidden ``nnx.Linear`` layers, tanh).

    The model is split by ``nnx.split`` into its graph (static) and its ``nnx.State`` (the
    donated argument, fed to the next call); ``x`` and ``y`` are ``(batch, width)`` float32.
    FLOP per call: ``6 * batch * (depth + 1) * width**2``.

    Raises:
        ModuleNotFoundError: Flax is not installed.
        ValueError: ``width``, ``depth`` or ``batch`` below 1, or ``lr`` not finite and > 0.
    """
    nnx = _need("flax.nnx", "flax")
    _check(width, depth, batch, lr)

    class MLP(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            self.layers = nnx.List([nnx.Linear(width, width, rngs=rngs) for _ in range(depth + 1)])

        def __call__(self, x: jax.Array) -> jax.Array:
            for layer in self.layers[:-1]:
                x = jnp.tanh(layer(x))
            return self.layers[-1](x)

    graph, state = nnx.split(MLP(nnx.Rngs(0)))

    def loss(state: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((nnx.merge(graph, state)(x) - y) ** 2)

    def step(state: Any, x: jax.Array, y: jax.Array) -> Any:
        value, grads = jax.value_and_grad(loss)(state, x, y)
        return jax.tree.map(lambda p, g: p - lr * g, state, grads), value

    return Step(
        fn=jax.jit(step, donate_argnums=0),
        args=(state, *_data(width, batch)),
        next_args=lambda args, out: (out[0], *args[1:]),
        reference=step,
        flops=_mlp_flops(width, depth, batch),
        tokens=batch,
    )


def nnx_attention(
    d_model: int = 64, heads: int = 4, seq: int = 16, batch: int = 8, lr: float = 1e-3
) -> Step:
    """One optax AdamW step of a Flax NNX attention block (``nnx.MultiHeadAttention``).

    The block is ``Linear(x + MultiHeadAttention(x))`` over ``(batch, seq, d_model)`` float32
    inputs, regressed on ``sin(x)``. Its arguments: the ``nnx.Param`` state and AdamW's state
    (both donated, fed to the next call), ``x`` and ``y``.

    The key projection's bias gets a gradient within rounding of zero (softmax is unchanged by
    a shift shared by all keys), and one AdamW step moves every weight by about ``lr`` whatever
    its gradient, so the jitted and plain steps may move that bias in opposite directions. The
    step says so where jaxbench looks for it: ``Step.tolerances`` gives the parameters the
    documented Adam rule (:func:`jaxbench.workloads.adam_first_step`); the loss and AdamW's
    moments keep float32's tolerance.

    FLOP per call, forward and backward: ``6 * batch * seq * 5 * d_model**2`` for the four
    attention projections and the output layer, plus ``6 * 2 * batch * seq**2 * d_model`` for
    the scores and their weighted sum.

    Raises:
        ModuleNotFoundError: Flax (or optax) is not installed.
        ValueError: A size below 1, ``d_model`` not a multiple of ``heads``, or ``lr`` not
            finite and > 0.
    """
    nnx = _need("flax.nnx", "flax")
    optax = _need("optax", "flax")
    _check_attention(d_model, heads, seq, batch, lr)

    class Block(nnx.Module):
        def __init__(self, rngs: Any) -> None:
            self.attn = nnx.MultiHeadAttention(
                num_heads=heads, in_features=d_model, decode=False, rngs=rngs
            )
            self.out = nnx.Linear(d_model, d_model, rngs=rngs)

        def __call__(self, x: jax.Array) -> jax.Array:
            return self.out(x + self.attn(x))

    graph, params, rest = nnx.split(Block(nnx.Rngs(0)), nnx.Param, ...)

    def loss(params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((nnx.merge(graph, params, rest)(x) - y) ** 2)

    return _adamw_attention(optax, loss, params, d_model, seq, batch, lr)


def _adamw_attention(
    optax: Any, loss: Any, params: Any, d_model: int, seq: int, batch: int, lr: float
) -> Step:
    """The AdamW step of an attention block's ``loss(params, x, y)``, and its ``Step``.

    Arguments: ``params`` and AdamW's state (donated, fed to the next call), ``x`` of
    ``(batch, seq, d_model)`` from N(0, 1) and ``y = sin(x)``. FLOP per call: as
    :func:`nnx_attention`. The parameters are held to the Adam rule
    (:func:`jaxbench.workloads.adam_first_step`), the loss and moments to float32's tolerance.
    """
    from jaxbench.workloads import adam_first_step

    optimizer = optax.adamw(lr)

    def step(params: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
        value, grads = jax.value_and_grad(loss)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    x = jax.random.normal(jax.random.key(7), (batch, seq, d_model))
    return Step(
        fn=jax.jit(step, donate_argnums=(0, 1)),
        args=(params, optimizer.init(params), x, jnp.sin(x)),
        next_args=lambda args, out: (out[0], out[1], *args[2:]),
        reference=step,
        flops=6 * batch * seq * 5 * d_model**2 + 12 * batch * seq**2 * d_model,
        tokens=batch * seq,
        reduction_length=max(d_model, seq, batch * seq),
        tolerances={"0/*": adam_first_step(lr)},
    )


def equinox_attention(
    d_model: int = 64, heads: int = 4, seq: int = 16, batch: int = 8, lr: float = 1e-3
) -> Step:
    """One optax AdamW step of an Equinox attention block (``eqx.nn.MultiheadAttention``).

    The Equinox twin of :func:`nnx_attention`: ``Linear(x + MultiheadAttention(x))`` over
    ``(batch, seq, d_model)`` float32 inputs (one example at a time under ``vmap``, as Equinox
    layers are written), regressed on ``sin(x)``, with query, key, value and output biases.
    Its arguments: the model's arrays and AdamW's state (both donated, fed to the next call),
    ``x`` and ``y``. The key bias gets a gradient within rounding of zero, as in
    :func:`nnx_attention`, so ``Step.tolerances`` gives the parameters the documented Adam
    rule (:func:`jaxbench.workloads.adam_first_step`); loss and moments keep float32's.

    FLOP per call: as :func:`nnx_attention`.

    Raises:
        ModuleNotFoundError: Equinox (or optax) is not installed.
        ValueError: A size below 1, ``d_model`` not a multiple of ``heads``, or ``lr`` not
            finite and > 0.
    """
    eqx = _need("equinox", "equinox")
    optax = _need("optax", "equinox")
    _check_attention(d_model, heads, seq, batch, lr)
    k_attn, k_out = jax.random.split(jax.random.key(0))
    attn = eqx.nn.MultiheadAttention(
        heads,
        d_model,
        use_query_bias=True,
        use_key_bias=True,
        use_value_bias=True,
        use_output_bias=True,
        key=k_attn,
    )
    model = (attn, eqx.nn.Linear(d_model, d_model, key=k_out))
    arrays, static = eqx.partition(model, eqx.is_array)

    def block(arrays: Any, x: jax.Array) -> jax.Array:  # x: (seq, d_model)
        attn, out = eqx.combine(arrays, static)
        return jax.vmap(out)(x + attn(x, x, x))

    def loss(arrays: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((jax.vmap(block, in_axes=(None, 0))(arrays, x) - y) ** 2)

    return _adamw_attention(optax, loss, arrays, d_model, seq, batch, lr)
