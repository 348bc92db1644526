"""Workload: K Jacobian-vector products at one linearization point, five ways.

The function is the MLP ``forward(params, x)`` as a function of one primal: its input ``x``
(``wrt="input"``, shape ``(B, d_in)``) or its params (``wrt="params"``, the params PyTree). Given K
tangents shaped like that primal, each strategy returns the K JVPs ``J t_k``, each ``(B, d_out)``:

- ``linearize``: ``jax.linearize`` once, then K applications of the linear function (timed
  together);
- ``linearize_apply``: only the K applications (the linearization is made before timing);
- ``vmap_jvp``: one ``jax.vmap(jax.jvp)`` call over the stacked tangents;
- ``jvp_loop``: K separate ``jax.jvp`` calls (each recomputes the primal);
- ``jacfwd``: the Jacobian with ``jax.jacfwd`` (per row for ``wrt="input"``, since rows of an MLP
  batch are independent: ``(B, d_out, d_in)``), then K contractions; only where it fits in
  :data:`JACOBIAN_MAX_BYTES`.

The two linearize strategies and the jvp loop dispatch K jitted calls from Python a timed
call (one per tangent), ``vmap_jvp`` and ``jacfwd`` one: at small sizes the per-call dispatch
(microseconds) is part of what they compare.

``held_bytes``: the bytes of the linear function's data (``jax.linearize``'s residuals and the
constants it closes over, the weights among them) for both linearize strategies (``linearize``
builds it in every call, ``linearize_apply`` holds it across calls), the Jacobian's for
``jacfwd``, and 0 for ``vmap_jvp`` and the jvp loop, whose residuals live only inside a call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxbench.measure.harness import CompileTarget
from jaxbench.workloads import mlp
from jaxbench.workloads.base import (
    AsvSuite,
    GateFailure,
    NotApplicable,
    Workload,
    check_choice,
    check_close,
)
from jaxbench.workloads.regression import (
    SIZE,
    DriftSets,
    Inputs,
    host,
    on_device,
    row_variant,
    unflatten_params,
)
from jaxbench.workloads.sizes import DTYPES, SIZES, check_dtype, get_size
from jaxbench.workloads.step import Step, gate_tolerance
from jaxbench.workloads.trees import flatten_tree

STRATEGIES = ("linearize", "linearize_apply", "vmap_jvp", "jvp_loop", "jacfwd")
WRT = ("input", "params")
K_MAX = 65536
JACOBIAN_MAX_BYTES = 256 * 2**20
REFERENCE_TANGENTS = 8
#: Tangents of the drift sets.
K_TANGENTS = 3


class TangentShapeError(ValueError):
    """A tangent does not match its primal: wrong shape or dtype. The message gives the expected."""


def check_tangent(primal: Any, tangent: Any, batched: bool) -> None:
    """Check a tangent PyTree (or a stack of K, if ``batched``) against its primal, at trace time.

    Raises:
        TangentShapeError: PyTree structure differs, a leaf's shape is not the primal leaf's
            (``(K, *shape)`` when batched), or its dtype differs.
    """
    p_leaves, p_tree = jax.tree_util.tree_flatten_with_path(primal)
    t_leaves, t_tree = jax.tree.flatten(tangent)
    if p_tree != t_tree:
        raise TangentShapeError(f"tangent has structure {t_tree}; expected {p_tree}")
    for (path, p), t in zip(p_leaves, t_leaves, strict=True):
        want = ("K", *p.shape) if batched else tuple(p.shape)
        got = tuple(t.shape)
        ok = (len(got) == p.ndim + 1 and got[1:] == tuple(p.shape)) if batched else got == want
        if not ok or t.dtype != p.dtype:
            raise TangentShapeError(
                f"tangent{jax.tree_util.keystr(path)} has shape {got} and dtype {t.dtype}; "
                f"expected shape {want} and dtype {p.dtype} (the primal's)"
            )


def held_bytes(tree: Any) -> int:
    """Bytes of the distinct arrays in a PyTree (e.g. a linear function from ``jax.linearize``)."""
    seen: dict[int, int] = {}
    for leaf in jax.tree.leaves(tree):
        if hasattr(leaf, "nbytes"):
            seen[id(leaf)] = int(leaf.nbytes)
    return sum(seen.values())


def linearization_held_bytes(fn: Callable[..., Any], *primals: Any) -> int:
    """Bytes that ``jax.linearize(fn, *primals)`` keeps alive in its linear function (residuals)."""
    _, f_lin = jax.linearize(fn, *primals)
    return held_bytes(f_lin)


def tanh_stack(x: jax.Array, depth: int) -> jax.Array:
    """``tanh`` applied ``depth`` times: each level adds one residual of ``x``'s size."""
    for _ in range(depth):
        x = jnp.tanh(x)
    return x


def as_function_of(wrt: str, params: mlp.Params, x: jax.Array) -> tuple[Callable, Any]:
    """``(f, primal)``: the MLP as a function of its input or of its params, and that primal."""
    if wrt == "input":
        return functools.partial(mlp.forward, params), x
    return (lambda p: mlp.forward(p, x)), params


def _jvp_one(wrt: str, params: mlp.Params, x: jax.Array, t: Any) -> tuple[jax.Array, jax.Array]:
    f, primal = as_function_of(wrt, params, x)
    check_tangent(primal, t, batched=False)
    return jax.jvp(f, (primal,), (t,))


def _vmap_jvp(wrt: str, params: mlp.Params, x: jax.Array, ts: Any) -> jax.Array:
    f, primal = as_function_of(wrt, params, x)
    check_tangent(primal, ts, batched=True)
    return jax.vmap(lambda t: jax.jvp(f, (primal,), (t,))[1])(ts)


def _linearize(wrt: str, params: mlp.Params, x: jax.Array) -> tuple[jax.Array, Any]:
    f, primal = as_function_of(wrt, params, x)
    return jax.linearize(f, primal)


def _apply(f_lin: Any, t: Any) -> jax.Array:
    return f_lin(t)


def _jacfwd_products(wrt: str, params: mlp.Params, x: jax.Array, ts: Any) -> jax.Array:
    f, primal = as_function_of(wrt, params, x)
    check_tangent(primal, ts, batched=True)
    if wrt == "input":

        def one_row(row: jax.Array) -> jax.Array:
            return mlp.forward(params, row[None])[0]

        jac = jax.vmap(jax.jacfwd(one_row))(x)  # (B, d_out, d_in)
        return jnp.einsum("boi,kbi->kbo", jac, ts)
    jac = jax.jacfwd(f)(params)  # leaves (B, d_out, *leaf shape)
    k = jax.tree.leaves(ts)[0].shape[0]
    parts = jax.tree.map(
        lambda j, t: jnp.einsum("bon,kn->kbo", j.reshape(*j.shape[:2], -1), t.reshape(k, -1)),
        jac,
        ts,
    )
    return sum(jax.tree.leaves(parts))


def jacobian_bytes(size: Any, wrt: str, itemsize: int) -> int:
    """Bytes of the Jacobian that the ``jacfwd`` strategy forms."""
    per_output = size.d_in if wrt == "input" else size.params_count
    return size.batch * size.d_out * per_output * itemsize


@functools.cache
def jitted(wrt: str = "input") -> dict[str, Any]:
    """The jitted building blocks for one ``wrt``, built once per process, by name."""
    return {
        "jvp": jax.jit(functools.partial(_jvp_one, wrt)),
        "vmap_jvp": jax.jit(functools.partial(_vmap_jvp, wrt)),
        "linearize": jax.jit(functools.partial(_linearize, wrt)),
        "apply": jax.jit(_apply),
        "jacfwd": jax.jit(functools.partial(_jacfwd_products, wrt)),
    }


def check_k(k: Any) -> int:
    """Return ``k`` if it is an int in ``1..K_MAX``; else raise ``ValueError`` naming ``k``."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= K_MAX:
        raise ValueError(f"k (number of tangents) must be an integer in 1..{K_MAX}, got {k!r}")
    return k


def drift_standard(dtype: str) -> Inputs:
    """The drift sets' standard inputs: the workload's own seeded ``tiny`` case.

    Params, ``x`` ``(32, 32)`` and :data:`K_TANGENTS` tangents ``(K, 32, 32)`` with respect to
    the input, in ``dtype``.
    """
    step = forward(size=SIZE, dtype=dtype, k=K_TANGENTS, strategy="vmap_jvp", wrt="input")
    params, x, tangents = step.first_args()
    return flatten_tree(params, "params") | {"x": np.asarray(x), "tangents": np.asarray(tangents)}


def drift_variant(name: str, std: Inputs) -> Inputs:
    """A drift set from the standard inputs: the rows of ``x`` varied.

    :func:`~jaxbench.workloads.regression.row_variant`; ``single`` also cuts the tangents to
    ``(K, 1, d_in)``; ``invalid_shape`` drops their last feature.
    """
    out = row_variant(name, std)
    if name == "single":
        out["tangents"] = std["tangents"][:, :1]
    elif name == "invalid_shape":
        out["tangents"] = std["tangents"][..., :-1]
    return out


def drift_outputs(inputs: Inputs, dtype: str, device: Any | None = None) -> Inputs:
    """Primal output and K JVPs w.r.t. the input, by ``jax.jvp`` and by ``jax.linearize``.

    Args:
        inputs: ``params.<layer>.<w|b>``, ``x`` ``(B, d_in)`` (the linearization point) and
            ``tangents`` ``(K, B, d_in)``.
        dtype: The set's dtype, the inputs' (the computation's).
        device: The ``jax.Device`` to compute on; ``None`` for the default.

    Returns:
        ``primal`` ``(B, d_out)``; ``jvp`` ``(K, B, d_out)``, ``J t_k`` by the jitted ``jvp``;
        ``linearize`` ``(K, B, d_out)``, the same by one jitted ``linearize`` and K ``apply``;
        in the params' dtype, host numpy arrays.

    Raises:
        TangentShapeError: A tangent's shape or dtype is not the primal's.
    """
    fns = jitted("input")
    params = on_device(unflatten_params(inputs), device)
    x = on_device(inputs["x"], device)
    tangents = [on_device(t, device) for t in inputs["tangents"]]
    primal, jvps = None, []
    for t in tangents:
        primal, jvp_out = fns["jvp"](params, x, t)
        jvps.append(jvp_out)
    lin_primal, f_lin = fns["linearize"](params, x)
    lin = [fns["apply"](f_lin, t) for t in tangents]
    if primal is None:
        primal = lin_primal
    return {"primal": host(primal), "jvp": np.stack(host(jvps)), "linearize": np.stack(host(lin))}


def forward(
    size: str = "tiny",
    dtype: str = "float32",
    k: int = 1,
    strategy: str = "vmap_jvp",
    wrt: str = "input",
) -> Step:
    """The family's factory: params, primal, K tangents, the strategy's timed call, its gate.

    Args:
        size: A name of :data:`jaxbench.workloads.sizes.SIZES`.
        dtype: ``float32`` or ``bfloat16``.
        k: Tangents (JVPs) per call, 1 to :data:`K_MAX`.
        strategy: One of :data:`STRATEGIES` (the module's docstring).
        wrt: ``input`` or ``params``, the primal the JVPs are taken with respect to.

    Returns:
        A :class:`~jaxbench.workloads.step.Step` whose call returns the K JVPs; its
        ``programs`` are the strategy's (``linearize`` compiled and, for ``linearize_apply``,
        run untimed by ``make_args``), and ``held_bytes`` is as the module's docstring says
        (the linear function's data, or the Jacobian; 0 for ``vmap_jvp`` and ``jvp_loop``).

    Raises:
        NotApplicable: ``jacfwd`` whose Jacobian would exceed :data:`JACOBIAN_MAX_BYTES`.
    """
    spec = get_size(size)
    np_dtype = jnp.dtype(dtype)
    jac_bytes = jacobian_bytes(spec, wrt, np_dtype.itemsize)
    if strategy == "jacfwd" and jac_bytes > JACOBIAN_MAX_BYTES:
        raise NotApplicable(
            f"jacfwd would form a {jac_bytes / 2**20:.0f} MiB Jacobian "
            f"(limit {JACOBIAN_MAX_BYTES / 2**20:.0f} MiB)"
        )
    key_params, key_x, key_t = jax.random.split(jax.random.key(1), 3)
    weights = mlp.init(key_params, spec.layer_sizes, np_dtype)
    x = jax.random.normal(key_x, (spec.batch, spec.d_in), jnp.float32).astype(np_dtype)
    ts = _tangents(key_t, as_function_of(wrt, weights, x)[1], k, np_dtype)
    tlist = [jax.tree.map(lambda a, i=i: a[i], ts) for i in range(k)]
    fns = jitted(wrt)
    shape_key = (spec.name, dtype, wrt)
    metrics: dict[str, Any] = {"held_bytes": 0}
    make_args = None

    if strategy in ("vmap_jvp", "jacfwd"):
        call, args = fns[strategy], (weights, x, ts)
        programs = [CompileTarget(strategy, (strategy, *shape_key, k), call, args)]
        if strategy == "jacfwd":
            metrics["held_bytes"] = jac_bytes
    elif strategy == "jvp_loop":
        programs = [
            CompileTarget("jvp", ("jvp", *shape_key), fns["jvp"], (weights, x, tlist[0]), k)
        ]
        call, args = _call_jvp_loop(fns), (weights, x, tlist)
    else:
        f_lin = jax.eval_shape(functools.partial(_linearize, wrt), weights, x)[1]
        lin_target = CompileTarget(
            "linearize",
            ("linearize", *shape_key),
            fns["linearize"],
            (weights, x),
            0 if strategy == "linearize_apply" else 1,
        )
        # Traced after the linearize target, so its lowering time is measured cold.
        apply_target = CompileTarget(
            "apply",
            ("apply", *shape_key),
            fns["apply"],
            lambda: (jax.eval_shape(fns["linearize"], weights, x)[1], tlist[0]),
            k,
        )
        programs = [lin_target, apply_target]
        metrics["held_bytes"] = _abstract_bytes(f_lin)
        args = (weights, x, tlist)
        if strategy == "linearize":
            call = _call_linearize(fns)
        else:
            call = _call_linearize_apply(fns)

            def make_args() -> Any:
                return (fns["linearize"](weights, x)[1], tlist)

    def first() -> Any:
        return make_args() if make_args is not None else args

    def gate() -> dict[str, Any]:
        got = call(*first())
        return _gate(strategy, wrt, got, weights, x, ts, tlist, dtype)

    return Step(fn=call, args=args, programs=tuple(programs), make_args=first, gate=gate,
                metrics=metrics)  # fmt: skip


def _tangents(key: jax.Array, primal: Any, k: int, dtype: Any) -> Any:
    """K standard-normal tangents shaped like ``primal``, stacked on a leading axis."""
    leaves, tree = jax.tree.flatten(primal)
    keys = jax.random.split(key, len(leaves))
    return tree.unflatten(
        [
            jax.random.normal(kk, (k, *leaf.shape), jnp.float32).astype(dtype)
            for kk, leaf in zip(keys, leaves, strict=True)
        ]
    )


def _abstract_bytes(tree: Any) -> int:
    return sum(int(leaf.size) * leaf.dtype.itemsize for leaf in jax.tree.leaves(tree))


def _call_jvp_loop(fns: dict[str, Any]) -> Callable[..., Any]:
    jvp = fns["jvp"]

    def call(weights: Any, x: Any, tangents: Any) -> list[jax.Array]:
        return [jvp(weights, x, t)[1] for t in tangents]

    return call


def _call_linearize(fns: dict[str, Any]) -> Callable[..., Any]:
    lin, apply = fns["linearize"], fns["apply"]

    def call(weights: Any, x: Any, tangents: Any) -> list[jax.Array]:
        f_lin = lin(weights, x)[1]
        return [apply(f_lin, t) for t in tangents]

    return call


def _call_linearize_apply(fns: dict[str, Any]) -> Callable[..., Any]:
    apply = fns["apply"]

    def call(f_lin: Any, tangents: Any) -> list[jax.Array]:
        return [apply(f_lin, t) for t in tangents]

    return call


def _gate(
    strategy: str,
    wrt: str,
    got: Any,
    weights: mlp.Params,
    x: jax.Array,
    ts: Any,
    tlist: list[Any],
    dtype: str,
) -> dict[str, Any]:
    """Agreement with plain (unjitted) ``jax.jvp`` and ``vmap(jvp)``; bad-shape errors.

    Within the tolerance of the longest sum behind a JVP
    (:func:`jaxbench.workloads.step.gate_tolerance`): a matmul's inner dimension, or the
    Jacobian's contraction with a tangent for ``jacfwd``.
    """
    fns = jitted(wrt)
    bad = jax.tree.map(lambda a: a[..., :-1], ts)
    for label, fn, args in (
        ("vmap_jvp", fns["vmap_jvp"], (weights, x, bad)),
        ("jvp", fns["jvp"], (weights, x, jax.tree.map(lambda a: a[0], bad))),
    ):
        try:
            fn(*args)
        except TangentShapeError:
            continue
        raise GateFailure(f"{label} with a wrong-shape tangent did not raise TangentShapeError")

    got = jnp.stack(got) if isinstance(got, list) else got
    n = min(REFERENCE_TANGENTS, len(tlist))
    f, primal = as_function_of(wrt, weights, x)
    plain = jnp.stack([jax.jvp(f, (primal,), (tlist[i],))[1] for i in range(n)])
    # The jitted strategy sums in another order than plain jvp: the longest sum behind a JVP is
    # a matmul's inner dimension, or, for jacfwd, the contraction of the Jacobian with the
    # tangent (over every parameter with wrt=params): the tolerance of that many terms, as
    # the train step's gate takes (gate_tolerance).
    widths = [w.shape[0] for w in jax.tree.leaves(weights) if w.ndim == 2]
    longest = max(widths)
    if strategy == "jacfwd":
        longest = max(longest, sum(int(leaf.size) for leaf in jax.tree.leaves(primal))
                      if wrt == "params" else x.shape[-1])  # fmt: skip
    tol = gate_tolerance(dtype, longest)
    vs_plain = check_close(f"{strategy} vs plain jvp", got[:n], plain, dtype, tol)
    # Unjitted, so the gate never compiles (and warms) another strategy's program.
    plain_vmap = jax.vmap(lambda t: jax.jvp(f, (primal,), (t,))[1])(ts)
    vs_vmap = check_close(f"{strategy} vs vmap_jvp", got, plain_vmap, dtype, tol)
    return {
        "rtol": vs_plain["rtol"],
        "atol": vs_plain["atol"],
        "max_abs_err_vs_plain": vs_plain["max_abs_err"],
        "max_abs_err_vs_vmap_jvp": vs_vmap["max_abs_err"],
        "reference_tangents": n,
    }


class ForwardMode(Workload):
    """linearize vs vmap(jvp) vs jvp loop vs jacfwd over sizes, dtypes, K and the primal.

    Parameters: ``size``, ``dtype``, ``k`` (tangents, 1..65536), ``strategy``
    (:data:`STRATEGIES`), ``wrt`` (``input`` or ``params``).
    """

    name = "forward"
    factory = staticmethod(forward)
    param_names = ("size", "dtype", "k", "strategy", "wrt")
    #: The MLP's widest layer is 64 wide.
    drift = DriftSets(DTYPES, 64, TangentShapeError, drift_standard, drift_variant, drift_outputs)
    asv = (
        AsvSuite("ForwardProducts",
                 {"size": ["tiny", "small"], "k": [1, 64],
                  "strategy": ["linearize", "linearize_apply", "vmap_jvp", "jvp_loop"]},
                 {"dtype": "float32", "wrt": "input"}, method="time_products",
                 module="bench_forward"),
        AsvSuite("ForwardCosts",
                 {"size": ["small"], "strategy": ["linearize", "vmap_jvp", "jvp_loop"]},
                 {"dtype": "float32", "k": 8, "wrt": "input"}, kind="costs",
                 tracks={"held_bytes": "bytes"}, timeout=120, module="bench_forward"),
    )  # fmt: skip

    def grid(self, quick: bool) -> dict[str, list[Any]]:
        """Quick: tiny and small, float32, K in 1 and 64, wrt input. Full: all, K to 1024."""
        if quick:
            return {
                "size": ["tiny", "small"],
                "dtype": ["float32"],
                "k": [1, 64],
                "strategy": list(STRATEGIES),
                "wrt": ["input"],
            }
        return {
            "size": list(SIZES),
            "dtype": list(DTYPES),
            "k": [1, 4, 16, 64, 256, 1024],
            "strategy": list(STRATEGIES),
            "wrt": list(WRT),
        }

    def meant_for(self, params: Mapping[str, Any]) -> str:
        """``"cpu"`` or ``"gpu"``: where the case's size is meant to run."""
        return get_size(params["size"]).device

    def validate(self, params: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming a bad ``size``, ``dtype``, ``k``, ``strategy`` or ``wrt``."""
        get_size(params["size"])
        check_dtype(params["dtype"])
        check_k(params["k"])
        check_choice("strategy", params["strategy"], STRATEGIES)
        check_choice("wrt", params["wrt"], WRT)

    def benchmark(self, params: Mapping[str, Any]) -> str:
        """``forward/<strategy>``."""
        return f"{self.name}/{params['strategy']}"
