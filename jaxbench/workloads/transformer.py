"""Workload: a decoder-only transformer LM train step (AdamW), over model sizes and dtypes.

The model is :mod:`jaxbench.workloads.lm`. Each case records, besides XLA's counted FLOP (the
record's ``flops``), ``model_flops`` by the PaLM formula (:meth:`LMSize.model_flops`) and
``tokens`` per step, from which analysis derives tokens/s and the MFU of both counts.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxbench.measure.harness import CompileTarget
from jaxbench.workloads import lm, meshes
from jaxbench.workloads.base import (
    UPDATE_RTOL_BFLOAT16,
    AsvSuite,
    GateFailure,
    Workload,
    adam_first_step,
    check_close,
    check_loss_lowered,
    check_update,
    copy_tree,
)
from jaxbench.workloads.lm import LMSize
from jaxbench.workloads.regression import SIZE, DriftSets, Inputs, host, on_device
from jaxbench.workloads.sizes import DTYPES, check_dtype
from jaxbench.workloads.step import Step
from jaxbench.workloads.trees import flatten_tree, path_text, unflatten_like

LM_SIZES: dict[str, LMSize] = {
    s.name: s
    for s in (
        LMSize("tiny", d_model=64, n_layers=2, n_heads=2, seq_len=64, batch=4, vocab=512,
               device="cpu"),
        LMSize("small", d_model=128, n_layers=4, n_heads=4, seq_len=128, batch=8, vocab=2048,
               device="cpu"),
        LMSize("medium", d_model=256, n_layers=6, n_heads=8, seq_len=256, batch=8, vocab=8192,
               device="cpu"),
        # GPT-2 small's shape (Radford et al. 2019) with a 32k vocabulary: 136 M parameters.
        LMSize("125m", d_model=768, n_layers=12, n_heads=12, seq_len=1024, batch=8,
               vocab=32768, device="gpu"),
        LMSize("350m", d_model=1024, n_layers=24, n_heads=16, seq_len=1024, batch=8,
               vocab=32768, device="gpu"),
        # 0.94 B parameters; float32 weights and AdamW moments 10.5 GiB, activations of one step
        # tens of GiB: one large GPU.
        LMSize("1b", d_model=2048, n_layers=16, n_heads=16, seq_len=2048, batch=4,
               vocab=32768, device="gpu"),
    )
}  # fmt: skip


def get_lm_size(name: str) -> LMSize:
    """A size of :data:`LM_SIZES` by name.

    Raises:
        ValueError: Unknown name; the message lists the known ones.
    """
    try:
        return LM_SIZES[name]
    except KeyError:
        raise ValueError(f"unknown size {name!r}; choose from {', '.join(LM_SIZES)}") from None


@functools.cache
def jitted_step(size: LMSize, dtype: str) -> Any:
    """The jitted AdamW step of ``size`` computing in ``dtype``, its state donated.

    ``(state, tokens) -> (state, loss)``; callers pass the returned state to the next call.
    """
    return jax.jit(_plain_step(size, dtype), donate_argnums=(0,))


def _plain_step(size: LMSize, dtype: str) -> Any:
    return functools.partial(lm.train_step, n_heads=size.n_heads, dtype=jnp.dtype(dtype))


def drift_standard(dtype: str) -> Inputs:
    """The drift sets' standard inputs: the workload's own seeded ``tiny`` case.

    Float32 master weights (``params.<path>``: ``params.embed`` ``(V, d)``,
    ``params.layers.<i>.qkv`` ``(d, 3d)``, ...) and its token batch ``tokens`` ``(B, T + 1)``
    int32 (:func:`transformer`); the same in every dtype (the compute dtype varies).
    """
    state, tokens = transformer(size=SIZE, dtype=dtype).first_args()
    return flatten_tree(state.params, "params") | {"tokens": np.asarray(tokens)}


def drift_variant(name: str, std: Inputs) -> Inputs:
    """A drift set from the standard inputs: the tokens varied.

    ``single``: the first sequence; ``zeros``: every token 0 (every key alike: uniform
    attention); ``boundary``: the edges of the vocabulary as the first two sequences (all
    ``V - 1``; ``0`` and ``V - 1`` alternating); ``invalid_shape``: one position more than the
    position table holds (raises :class:`~jaxbench.workloads.lm.TokenShapeError`).
    """
    tokens = std["tokens"]
    out = dict(std)
    if name == "single":
        out["tokens"] = tokens[:1]
    elif name == "zeros":
        out["tokens"] = np.zeros_like(tokens)
    elif name == "boundary":
        last = std["params.embed"].shape[0] - 1
        edges = np.stack([np.full(tokens.shape[1], last), np.arange(tokens.shape[1]) % 2 * last])
        out["tokens"] = np.concatenate([edges.astype(tokens.dtype), tokens[len(edges) :]])
    elif name == "invalid_shape":
        out["tokens"] = np.concatenate([tokens, tokens[:, :1]], axis=1)
    return out


@functools.cache
def _lm_value_and_grad(n_heads: int, dtype: str) -> Any:
    def loss(params: Any, tokens: jax.Array) -> jax.Array:
        return lm.loss(params, tokens, n_heads, jnp.dtype(dtype))

    def logits(params: Any, tokens: jax.Array) -> jax.Array:
        return lm.forward(params, tokens[:, :-1], n_heads, jnp.dtype(dtype))

    return jax.jit(jax.value_and_grad(loss)), jax.jit(logits)


def drift_outputs(inputs: Inputs, dtype: str, device: Any | None = None) -> Inputs:
    """Loss, logits and gradients of the ``tiny`` decoder LM on a token batch.

    Not the AdamW update: its first step moves each weight by about ``lr * sign(gradient)``, so
    a gradient within rounding of zero may move it either way, a difference of ``2 lr`` that
    says nothing of drift.

    Args:
        inputs: ``params.<path>`` (float32 master weights) and ``tokens`` ``(B, T + 1)`` int32.
        dtype: The compute dtype (``float32``, ``bfloat16``; ``float64`` for an exact reference
            with ``jax_enable_x64`` and :data:`jaxbench.workloads.lm.WIDE` widened).
        device: The ``jax.Device`` to compute on; ``None`` for the default.

    Returns:
        ``loss`` ``()`` float32, ``logits`` ``(B, T, V)`` float32 and ``grad.<path>`` shaped
        like the params (float32); host numpy arrays.

    Raises:
        jaxbench.workloads.lm.TokenShapeError: ``tokens`` has the wrong shape or dtype.
        ValueError: A parameter of the model is missing from ``inputs``.
    """
    size = get_lm_size(SIZE)
    template = jax.eval_shape(lambda key: lm.init(key, size), jax.random.key(0))
    params = on_device(unflatten_like(template, inputs, "params"), device)
    tokens = on_device(inputs["tokens"], device)
    value_and_grad, logits = _lm_value_and_grad(size.n_heads, dtype)
    loss, grads = value_and_grad(params, tokens)
    out = {"loss": host(loss), "logits": host(logits(params, tokens))}
    return out | flatten_tree(grads, "grad")


def transformer(size: str = "tiny", dtype: str = "float32", mesh: str = meshes.NONE) -> Step:
    """The family's factory: params, AdamW state, a token batch, the donated step, its gate.

    Args:
        size: A name of :data:`LM_SIZES`.
        dtype: ``float32`` or ``bfloat16``, the compute dtype (parameters stay float32).
        mesh: ``none``, or ``axis:size`` pairs (:mod:`jaxbench.workloads.meshes`); records
            made before it existed lack it, hence the default.

    Returns:
        A :class:`~jaxbench.workloads.step.Step` whose call is ``(state, tokens) -> (state,
        loss)``; ``flops`` by the PaLM formula and ``tokens`` per step.
    """
    spec = get_lm_size(size)
    key_params, key_tokens = jax.random.split(jax.random.key(3))
    state0 = lm.init_state(lm.init(key_params, spec))
    tokens = lm.make_tokens(key_tokens, spec)
    metrics = {"params_count": spec.params_count, "params_bytes": 4 * spec.params_count}
    if mesh == meshes.NONE:
        step, state, batch, shardings = jitted_step(spec, dtype), state0, tokens, None
    else:
        step, state, batch, shardings, facts = meshes.place_step(
            _plain_step(spec, dtype), ("transformer", spec.name, dtype), state0, tokens,
            mesh, donate=True,
        )  # fmt: skip
        metrics |= facts
    return Step(
        fn=step,
        args=(state, batch),
        next_args=lambda s, out: (out[0], s[1]),
        flops=spec.model_flops(),
        tokens=spec.tokens,
        programs=(CompileTarget("train_step", ("transformer", spec, dtype, mesh), step,
                                (state, batch)),),
        make_args=lambda: (state, batch),
        gate=lambda: _gate(spec, dtype, step, state, batch, (state0, tokens), shardings),
        metrics=metrics,
    )  # fmt: skip


def _gate(
    size: LMSize,
    dtype: str,
    step: Any,
    state0: Any,
    tokens: jax.Array,
    reference: tuple[Any, jax.Array] | None = None,
    shardings: Any = None,
) -> dict[str, Any]:
    """The jitted step against the same step run op by op; raises :class:`GateFailure`.

    The op-by-op step runs from ``reference`` (default the jitted step's own arguments; a
    sharded step's are its unsharded state and tokens on one device). With ``shardings`` (the
    state's), every leaf of the stepped state must still be on its sharding.

    Loss and AdamW moments (linear and quadratic in the gradient) must agree at the dtype's
    tolerance, and in bfloat16 the moments also in norm
    (:func:`jaxbench.workloads.base.check_update`). The parameters agree to ``2 * LEARNING_RATE``
    (:func:`jaxbench.workloads.base.adam_first_step`). One step must lower the loss on its
    batch, and a batch of floats or of too many positions must raise
    :class:`~jaxbench.workloads.lm.TokenShapeError`.
    """
    for label, bad in (
        ("dtype", tokens.astype(jnp.float32)),
        ("length", jnp.zeros((size.batch, size.seq_len + 2), jnp.int32)),
    ):
        try:
            step(copy_tree(state0), bad)
        except lm.TokenShapeError:
            continue
        raise GateFailure(f"tokens of the wrong {label} did not raise TokenShapeError")  # fmt: skip

    plain_state, plain_loss = _plain_step(size, dtype)(*(reference or (state0, tokens)))
    jit_state, jit_loss = step(copy_tree(state0), tokens)
    if shardings is not None:
        meshes.check_kept(jit_state, shardings)
    loss_check = check_close("loss (plain vs jit)", jit_loss, plain_loss, dtype)
    check_close("AdamW moments (plain vs jit)", jit_state.opt_state, plain_state.opt_state, dtype)
    adam = adam_first_step(lm.LEARNING_RATE)
    params_check = check_close(
        "params (plain vs jit)", jit_state.params, plain_state.params, dtype, leaves={"*": adam}
    )
    update = 0.0
    if dtype == "bfloat16":  # the moments in norm (see check_update); the params move by
        # about lr.sign(g), whose sign may flip where g is within rounding of 0 (adam_first_step)
        start = (reference or (state0, tokens))[0]
        update = check_update("AdamW moments (plain vs jit)", jit_state.opt_state,
                              plain_state.opt_state, start.opt_state,
                              UPDATE_RTOL_BFLOAT16)  # fmt: skip
    before = float(plain_loss)
    after = check_loss_lowered(step, jit_state, tokens, before)
    return {
        "rtol": loss_check["rtol"],
        "atol": loss_check["atol"],
        "params_atol": adam.atol,
        "max_abs_err_loss": loss_check["max_abs_err"],
        "max_abs_err_params": params_check["max_abs_err"],
        **(
            {"update_rtol": UPDATE_RTOL_BFLOAT16, "max_update_err": update}
            if dtype == "bfloat16"
            else {}
        ),
        "loss_before": before,
        "loss_after": after,
        "ln_vocab": math.log(size.vocab),
    }


class Transformer(Workload):
    """Decoder LM train step over :data:`LM_SIZES` and compute dtypes (float32 master weights).

    Parameters: ``size`` (a name of :data:`LM_SIZES`), ``dtype`` (``float32``/``bfloat16``, the
    compute dtype), ``mesh`` (``none``, or ``axis:size`` pairs of ``data``, ``fsdp``,
    ``tensor``: :mod:`jaxbench.workloads.meshes`; records made before it existed are ``none``).
    """

    name = "transformer"
    factory = staticmethod(transformer)
    param_names = ("size", "dtype", "mesh")
    spellings: Mapping[str, Callable[[str], str]] = {"mesh": meshes.spelled}
    #: Float32 and bfloat16 compute; a wider bfloat16 floor, as the measured rounding error
    #: needs (the reason is in :mod:`jaxbench.drift.tolerance`).
    drift = DriftSets(
        DTYPES,
        LM_SIZES[SIZE].longest_reduction,
        lm.TokenShapeError,
        drift_standard,
        drift_variant,
        drift_outputs,
        bfloat16_floor=UPDATE_RTOL_BFLOAT16,
    )
    asv = (
        AsvSuite("Transformer", {"size": ["tiny", "small", "125m", "1b"], "dtype": list(DTYPES)},
                 method="time_step", timeout=600, module="bench_transformer"),
        AsvSuite("TransformerCosts", {"size": ["tiny", "small", "125m"], "dtype": list(DTYPES)},
                 kind="costs", tracks={"tokens_per_s": "tokens/s", "model_mfu": "fraction"},
                 timeout=600, module="bench_transformer"),
    )  # fmt: skip

    def grid(self, quick: bool) -> dict[str, list[Any]]:
        """Quick: ``tiny`` float32 (its gate's op-by-op step is most of its 11-13 s). Full: all.

        Both on one device (``mesh=none``); a mesh is chosen with ``--param mesh=data:4``.
        """
        if quick:
            return {"size": ["tiny"], "dtype": ["float32"], "mesh": [meshes.NONE]}
        return {"size": list(LM_SIZES), "dtype": list(DTYPES), "mesh": [meshes.NONE]}

    def meant_for(self, params: Mapping[str, Any]) -> str:
        """``"cpu"`` or ``"gpu"``: where the case's size is meant to run."""
        return get_lm_size(params["size"]).device

    def validate(self, params: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming a bad ``size``, ``dtype`` or ``mesh``.

        A mesh is bad where its axes do not divide what they split
        (:func:`jaxbench.workloads.meshes.check_fits`, on the parameters' shapes).
        """
        size = get_lm_size(params["size"])
        check_dtype(params["dtype"])
        mesh = params.get("mesh", meshes.NONE)  # older callers give none
        if mesh != meshes.NONE:
            template = jax.eval_shape(lambda key: lm.init(key, size), jax.random.key(0))
            leaves = jax.tree_util.tree_flatten_with_path(template)[0]
            shapes = {path_text(p, "/"): leaf.shape for p, leaf in leaves}
            meshes.check_fits(mesh, shapes, size.batch, f"{size.name} transformer")

    def benchmark(self, params: Mapping[str, Any]) -> str:
        """Always ``transformer/train_step``."""
        return f"{self.name}/train_step"
