"""A decoder-only transformer LM as pure functions: init, forward, cross-entropy loss, AdamW step.

Pre-norm blocks (RMSNorm, Zhang and Sennrich 2019) of causal multi-head self-attention and a
GELU MLP of width ``4 d_model`` (Vaswani et al. 2017; Radford et al. 2019, GPT-2), learned
position embeddings, an untied output projection, next-token softmax cross-entropy. Parameters
are float32 master weights; ``dtype`` is the compute dtype (matmul inputs and activations), with
norms, the attention softmax and the loss in float32: the usual mixed-precision recipe.

Layers are a Python loop, not a ``scan``: XLA's cost analysis counts a while loop's body once,
so only an unrolled program has a FLOP count comparable with :meth:`LMSize.model_flops`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

Params = dict[str, Any]

#: AdamW (Loshchilov and Hutter, 2019) as in GPT-style training: betas (0.9, 0.95), decay 0.1
#: on the matrices (weights and embeddings), none on the norm gains (1-D), as in GPT-2 recipes.
LEARNING_RATE = 1e-3
WEIGHT_DECAY = 0.1
#: Initial weights ~ N(0, 0.02^2), as GPT-2.
INIT_STD = 0.02
#: The dtype of the norms, the attention softmax and the logits whatever the compute dtype.
#: Read at trace time: ``scripts/drift_tolerances.py`` sets it to float64 for its exact reference.
WIDE: Any = jnp.float32


@dataclass(frozen=True)
class LMSize:
    """A decoder LM shape and its batch: ``batch`` sequences of ``seq_len`` tokens per step.

    ``device`` is where the size is meant to run (``"cpu"`` sizes take milliseconds to a second
    per step on a laptop core; ``"gpu"`` sizes need an accelerator's memory and FLOP/s).
    """

    name: str
    d_model: int
    n_layers: int
    n_heads: int
    seq_len: int
    batch: int
    vocab: int
    device: str

    @property
    def d_ff(self) -> int:
        """MLP hidden width, ``4 d_model``."""
        return 4 * self.d_model

    @property
    def matmul_params(self) -> int:
        """Weights that take part in a matmul: attention, MLP and the output projection.

        Per layer ``4 d^2`` (query, key, value, output) plus ``2 d d_ff``; plus ``d V``. The input
        embedding table is a gather and the norm gains are elementwise: neither is counted.
        """
        d = self.d_model
        return self.n_layers * (4 * d * d + 2 * d * self.d_ff) + d * self.vocab

    @property
    def params_count(self) -> int:
        """Every parameter: :attr:`matmul_params`, token and position embeddings, norm gains."""
        d = self.d_model
        return self.matmul_params + (self.vocab + self.seq_len) * d + (2 * self.n_layers + 1) * d

    @property
    def longest_reduction(self) -> int:
        """The most terms summed into one element of a train step's loss, logits or gradients.

        The widest of: the matmul inputs (``d_model``, ``d_ff``), the attention over the
        sequence, the softmax over the vocabulary, and the gradients' sums over the step's
        tokens (and their ``3 d_model``, ``d_ff`` and vocabulary back-projections).
        """
        d = self.d_model
        return max(3 * d, self.d_ff, self.seq_len, self.vocab, self.tokens)

    @property
    def tokens(self) -> int:
        """Tokens trained on per step: ``batch * seq_len``."""
        return self.batch * self.seq_len

    def model_flops(self) -> int:
        """Model FLOP of one train step: ``(6 N + 12 L H Q T)`` per token, times :attr:`tokens`.

        The formula of Chowdhery et al. 2022 ("PaLM", appendix B, the definition of MFU): ``6 N``
        for the forward and backward matmuls of the ``N`` = :attr:`matmul_params` weights, and
        ``12 L H Q T`` for the attention scores and their weighted sum (``L`` layers, ``H`` heads
        of width ``Q``, sequence ``T``), counted without causal masking, as XLA runs them here.
        Elementwise work, norms, softmax and the optimizer update are not model FLOP.
        """
        per_token = 6 * self.matmul_params + 12 * self.n_layers * self.d_model * self.seq_len
        return per_token * self.tokens


class TokenShapeError(ValueError):
    """A token batch does not fit the model; the message gives the expected shape and dtype."""


class TrainState(NamedTuple):
    """Params and the optax AdamW state, threaded through :func:`train_step`."""

    params: Params
    opt_state: Any


def init(key: jax.Array, size: LMSize) -> Params:
    """Float32 parameters of ``size``: weights ~ N(0, :data:`INIT_STD`), norm gains 1.

    Returns:
        ``{"embed": (V, d), "pos": (T, d), "layers": [{"norm1": (d,), "qkv": (d, 3d),
        "out": (d, d), "norm2": (d,), "up": (d, d_ff), "down": (d_ff, d)}] * L,
        "norm": (d,), "unembed": (d, V)}``.
    """
    return _init(key, size)


@functools.partial(jax.jit, static_argnums=(1,))
def _init(key: jax.Array, size: LMSize) -> Params:
    d, f = size.d_model, size.d_ff
    keys = iter(jax.random.split(key, 3 + 4 * size.n_layers))

    def normal(*shape: int) -> jax.Array:
        return INIT_STD * jax.random.normal(next(keys), shape, jnp.float32)

    layers = [
        {"norm1": jnp.ones((d,)), "qkv": normal(d, 3 * d), "out": normal(d, d),
         "norm2": jnp.ones((d,)), "up": normal(d, f), "down": normal(f, d)}
        for _ in range(size.n_layers)
    ]  # fmt: skip
    return {"embed": normal(size.vocab, d), "pos": normal(size.seq_len, d), "layers": layers,
            "norm": jnp.ones((d,)), "unembed": normal(d, size.vocab)}  # fmt: skip


def make_tokens(key: jax.Array, size: LMSize) -> jax.Array:
    """A synthetic batch: ``(batch, seq_len + 1)`` int32 tokens, uniform over the vocabulary.

    Position ``t + 1`` is the target of position ``t``, so a step trains on ``seq_len`` tokens.
    """
    return jax.random.randint(key, (size.batch, size.seq_len + 1), 0, size.vocab, jnp.int32)


def check_tokens(params: Params, tokens: jax.Array) -> None:
    """Check a token batch against the params at trace time (free once compiled).

    Raises:
        TokenShapeError: ``tokens`` is not ``(B, T + 1)`` of an integer dtype with
            ``1 <= T <= seq_len`` (the position table's length).
    """
    max_len = params["pos"].shape[0]
    ok = (
        tokens.ndim == 2
        and 2 <= tokens.shape[1] <= max_len + 1
        and jnp.issubdtype(tokens.dtype, jnp.integer)
    )
    if not ok:
        raise TokenShapeError(
            f"tokens have shape {tuple(tokens.shape)} and dtype {tokens.dtype}; expected "
            f"(batch, T + 1) integers with 1 <= T <= {max_len}"
        )


def rms_norm(x: jax.Array, gain: jax.Array, eps: float = 1e-6) -> jax.Array:
    """RMSNorm (Zhang and Sennrich, 2019) over the last axis in :data:`WIDE`, cast back."""
    x32 = x.astype(WIDE)
    scaled = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (scaled * gain).astype(x.dtype)


def attention(x: jax.Array, layer: Params, n_heads: int) -> jax.Array:
    """Causal multi-head self-attention of ``x`` ``(B, T, d)``; softmax in :data:`WIDE`."""
    b, t, d = x.shape
    q, k, v = jnp.split(x @ layer["qkv"].astype(x.dtype), 3, axis=-1)
    q, k, v = (a.reshape(b, t, n_heads, d // n_heads) for a in (q, k, v))
    scores = jnp.einsum("bthq,bshq->bhts", q, k).astype(WIDE) / jnp.sqrt(d // n_heads)
    causal = jnp.tril(jnp.ones((t, t), dtype=bool))
    weights = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1).astype(x.dtype)
    mixed = jnp.einsum("bhts,bshq->bthq", weights, v).reshape(b, t, d)
    return mixed @ layer["out"].astype(x.dtype)


def forward(params: Params, tokens: jax.Array, n_heads: int, dtype: Any) -> jax.Array:
    """Logits ``(B, T, V)`` in :data:`WIDE` of int ``tokens`` ``(B, T)``, computing in ``dtype``."""
    t = tokens.shape[1]
    x = (params["embed"][tokens] + params["pos"][:t]).astype(dtype)
    for layer in params["layers"]:
        x = x + attention(rms_norm(x, layer["norm1"]), layer, n_heads)
        h = jax.nn.gelu(rms_norm(x, layer["norm2"]) @ layer["up"].astype(dtype))
        x = x + h @ layer["down"].astype(dtype)
    x = rms_norm(x, params["norm"])
    return (x @ params["unembed"].astype(dtype)).astype(WIDE)


def loss(params: Params, tokens: jax.Array, n_heads: int, dtype: Any) -> jax.Array:
    """Mean next-token cross-entropy (nats) of ``tokens`` ``(B, T + 1)``, in float32.

    Raises:
        TokenShapeError: See :func:`check_tokens`.
    """
    import optax

    check_tokens(params, tokens)
    logits = forward(params, tokens[:, :-1], n_heads, dtype)
    return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()


@functools.cache
def adamw() -> Any:
    """The optax AdamW transformation of this module's constants (weight decay masked to 2-D)."""
    import optax

    def decayed(params: Params) -> Any:
        return jax.tree.map(lambda p: p.ndim >= 2, params)

    return optax.adamw(LEARNING_RATE, b1=0.9, b2=0.95, weight_decay=WEIGHT_DECAY, mask=decayed)


def init_state(params: Params) -> TrainState:
    """The initial :class:`TrainState` of ``params``."""
    return TrainState(params, adamw().init(params))


def train_step(
    state: TrainState, tokens: jax.Array, n_heads: int, dtype: Any
) -> tuple[TrainState, jax.Array]:
    """One AdamW step on ``tokens``: ``(new state, loss at the old params)``."""
    import optax

    value, grads = jax.value_and_grad(loss)(state.params, tokens, n_heads, dtype)
    updates, opt_state = adamw().update(grads, state.opt_state, state.params)
    return TrainState(optax.apply_updates(state.params, updates), opt_state), value
