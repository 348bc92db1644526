"""Two workload factories in plain JAX, found by jaxbench through this package's entry points.

Each factory takes its parameters as keywords (their defaults are the case jaxbench runs when
no ``--param`` is given), checks them, and returns a :class:`jaxbench.workloads.Step`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxbench.workloads import Step


def _rms_norm(x: jax.Array, scale: jax.Array) -> jax.Array:
    # RMSNorm (Zhang & Sennrich, 2019), in float32 whatever the input dtype.
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-6)
    return (y * scale).astype(x.dtype)


def _block(params: dict, x: jax.Array, heads: int) -> jax.Array:
    """One pre-norm decoder block: causal self-attention then an MLP, both residual."""
    b, t, d = x.shape
    h = _rms_norm(x, params["norm1"])
    q, k, v = jnp.split(h @ params["qkv"], 3, axis=-1)
    q, k, v = (a.reshape(b, t, heads, d // heads) for a in (q, k, v))
    logits = jnp.einsum("bthd,bshd->bhts", q, k) / jnp.sqrt(d // heads).astype(x.dtype)
    causal = jnp.tril(jnp.ones((t, t), dtype=bool))
    logits = jnp.where(causal, logits, jnp.finfo(logits.dtype).min)
    attn = jax.nn.softmax(logits.astype(jnp.float32), axis=-1).astype(x.dtype)
    x = x + jnp.einsum("bhts,bshd->bthd", attn, v).reshape(b, t, d) @ params["out"]
    h = _rms_norm(x, params["norm2"])
    return x + jax.nn.gelu(h @ params["up"]) @ params["down"]


def attention_block(
    batch: int = 2, seq: int = 16, d_model: int = 32, heads: int = 2, dtype: str = "float32"
) -> Step:
    """Forward pass of one decoder block; arguments synthetic (``ShapeDtypeStruct``).

    FLOP per call: 2 FLOP per multiply-add of the four weight matmuls (24 * batch * seq *
    d_model**2 with a 4x MLP) plus the two attention matmuls (4 * batch * seq**2 * d_model),
    as in Kaplan et al. 2020, "Scaling Laws for Neural Language Models", table 1 (forward only).

    Raises:
        ValueError: ``d_model`` is not a multiple of ``heads``, or a size is below 1.
    """
    for name, value in (("batch", batch), ("seq", seq), ("d_model", d_model), ("heads", heads)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if d_model % heads:
        raise ValueError(f"d_model ({d_model}) must be a multiple of heads ({heads})")
    dt = jnp.dtype(dtype)
    shapes = {"qkv": (d_model, 3 * d_model), "out": (d_model, d_model),
              "up": (d_model, 4 * d_model), "down": (4 * d_model, d_model),
              "norm1": (d_model,), "norm2": (d_model,)}  # fmt: skip
    params = {k: jax.ShapeDtypeStruct(s, dt) for k, s in shapes.items()}
    x = jax.ShapeDtypeStruct((batch, seq, d_model), dt)

    def forward(params: dict, x: jax.Array) -> jax.Array:
        return _block(params, x, heads)

    flops = 24 * batch * seq * d_model**2 + 4 * batch * seq**2 * d_model
    # The widest sum behind an output: the MLP's down projection (4 d_model terms), the
    # attention over the sequence, or the query/key/value projections' d_model.
    widest = max(4 * d_model, seq)
    return Step(fn=jax.jit(forward), args=(params, x), flops=flops, tokens=batch * seq,
                reduction_length=widest)  # fmt: skip


def regression_step(width: int = 64, batch: int = 128, lr: float = 0.01) -> Step:
    """One SGD step of least-squares regression, its weights donated and fed to the next call.

    The plain reference is the same step without ``jax.jit``. FLOP per call: 6 * batch * width
    (forward 2, backward 4 per weight and example, the usual 6 N estimate).

    Raises:
        ValueError: ``width`` or ``batch`` below 1, or ``lr`` not positive.
    """
    if width < 1 or batch < 1:
        raise ValueError(f"width and batch must be >= 1, got {width} and {batch}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    key_w, key_x = jax.random.split(jax.random.key(1))
    w = jax.random.normal(key_w, (width,)) / width**0.5
    x = jax.random.normal(key_x, (batch, width))
    y = x @ jnp.ones(width)

    def step(w: jax.Array, x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
        loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        return w - lr * grad, loss

    return Step(
        fn=jax.jit(step, donate_argnums=0),
        args=(w, x, y),
        next_args=lambda args, out: (out[0], *args[1:]),
        reference=step,
        flops=6 * batch * width,
        tokens=batch,
        reduction_length=max(width, batch),  # x @ w over width; the mean over the batch
    )
