"""Workload: K Jacobian-vector products at one linearization point, five ways.

For the MLP ``f(x) = forward(params, x)`` with primal ``x`` of shape ``(B, d_in)`` and K tangents
of the same shape, each strategy returns the K JVPs ``J_f(x) t_k``, each ``(B, d_out)``:

- ``linearize``: ``jax.linearize`` once, then K applications of the linear function (timed
  together);
- ``linearize_apply``: only the K applications (the linearization is made before timing);
- ``vmap_jvp``: one ``jax.vmap(jax.jvp)`` call over the stacked tangents;
- ``jvp_loop``: K separate ``jax.jvp`` calls (each recomputes the primal);
- ``jacfwd``: the per-row Jacobians ``(B, d_out, d_in)`` with ``jax.vmap(jax.jacfwd)`` (rows of an
  MLP batch are independent), then K contractions; only where they fit in
  :data:`JACOBIAN_MAX_BYTES`.

The linearization holds residuals (``held_bytes``); vmap(jvp) and the jvp loop hold none.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from jaxbench.measure.harness import CompileTarget
from jaxbench.workloads import mlp
from jaxbench.workloads.base import Built, GateFailure, NotApplicable, check_close
from jaxbench.workloads.sizes import DTYPES, SIZES, check_dtype, get_size

STRATEGIES = ("linearize", "linearize_apply", "vmap_jvp", "jvp_loop", "jacfwd")
K_MAX = 65536
JACOBIAN_MAX_BYTES = 256 * 2**20
REFERENCE_TANGENTS = 8


class TangentShapeError(ValueError):
    """A tangent does not match its primal: wrong shape or dtype. The message gives the expected."""


def check_tangent(x: jax.Array, t: jax.Array, batched: bool) -> None:
    """Check a tangent (or a stack of K, if ``batched``) against the primal ``x``, at trace time.

    Raises:
        TangentShapeError: Shape is not ``x.shape`` (``(K, *x.shape)`` when batched) or dtype
            differs from ``x.dtype``.
    """
    want = ("K", *x.shape) if batched else tuple(x.shape)
    got = tuple(t.shape)
    ok = got[1:] == tuple(x.shape) and len(got) == x.ndim + 1 if batched else got == want
    if not ok or t.dtype != x.dtype:
        raise TangentShapeError(
            f"tangent has shape {got} and dtype {t.dtype}; expected shape {want} and dtype "
            f"{x.dtype} (the primal's)"
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


def _jvp_one(params: mlp.Params, x: jax.Array, t: jax.Array) -> tuple[jax.Array, jax.Array]:
    check_tangent(x, t, batched=False)
    return jax.jvp(functools.partial(mlp.forward, params), (x,), (t,))


def _vmap_jvp(params: mlp.Params, x: jax.Array, ts: jax.Array) -> jax.Array:
    check_tangent(x, ts, batched=True)
    f = functools.partial(mlp.forward, params)
    return jax.vmap(lambda t: jax.jvp(f, (x,), (t,))[1])(ts)


def _linearize(params: mlp.Params, x: jax.Array) -> tuple[jax.Array, Any]:
    return jax.linearize(functools.partial(mlp.forward, params), x)


def _apply(f_lin: Any, t: jax.Array) -> jax.Array:
    return f_lin(t)


def _jacfwd_products(params: mlp.Params, x: jax.Array, ts: jax.Array) -> jax.Array:
    check_tangent(x, ts, batched=True)

    def one_row(row: jax.Array) -> jax.Array:
        return mlp.forward(params, row[None])[0]

    jac = jax.vmap(jax.jacfwd(one_row))(x)  # (B, d_out, d_in): rows of an MLP are independent
    return jnp.einsum("boi,kbi->kbo", jac, ts)


@functools.cache
def jitted() -> dict[str, Any]:
    """The jitted building blocks, built once per process, by name."""
    return {
        "jvp": jax.jit(_jvp_one),
        "vmap_jvp": jax.jit(_vmap_jvp),
        "linearize": jax.jit(_linearize),
        "apply": jax.jit(_apply),
        "jacfwd": jax.jit(_jacfwd_products),
    }


def check_k(k: Any) -> int:
    """Return ``k`` if it is an int in ``1..K_MAX``; else raise ``ValueError`` naming ``k``."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= K_MAX:
        raise ValueError(f"k (number of tangents) must be an integer in 1..{K_MAX}, got {k!r}")
    return k


class ForwardMode:
    """linearize vs vmap(jvp) vs jvp loop vs jacfwd over sizes, dtypes and K.

    Parameters: ``size``, ``dtype``, ``k`` (tangents, 1..65536), ``strategy``
    (:data:`STRATEGIES`).
    """

    name = "forward"
    param_names = ("size", "dtype", "k", "strategy")

    def grid(self, quick: bool) -> dict[str, list[Any]]:
        """Quick: tiny and small, float32, K in 1, 8, 64. Full: every size, dtype, K to 1024."""
        if quick:
            return {
                "size": ["tiny", "small"],
                "dtype": ["float32"],
                "k": [1, 8, 64],
                "strategy": list(STRATEGIES),
            }
        return {
            "size": list(SIZES),
            "dtype": list(DTYPES),
            "k": [1, 4, 16, 64, 256, 1024],
            "strategy": list(STRATEGIES),
        }

    def validate(self, params: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming a bad ``size``, ``dtype``, ``k`` or ``strategy``."""
        get_size(params["size"])
        check_dtype(params["dtype"])
        check_k(params["k"])
        if params["strategy"] not in STRATEGIES:
            raise ValueError(
                f"unknown strategy {params['strategy']!r}; choose from {', '.join(STRATEGIES)}"
            )

    def benchmark(self, params: Mapping[str, Any]) -> str:
        """``forward/<strategy>``."""
        return f"{self.name}/{params['strategy']}"

    def build(self, params: Mapping[str, Any]) -> Built:
        """Params, primal, K tangents, the strategy's timed unit and its gate.

        Raises:
            NotApplicable: ``jacfwd`` whose Jacobian would exceed :data:`JACOBIAN_MAX_BYTES`.
        """
        size = get_size(params["size"])
        dtype = jnp.dtype(params["dtype"])
        k, strategy = params["k"], params["strategy"]
        jac_bytes = size.batch * size.d_in * size.d_out * dtype.itemsize
        if strategy == "jacfwd" and jac_bytes > JACOBIAN_MAX_BYTES:
            raise NotApplicable(
                f"jacfwd would form a {jac_bytes / 2**20:.0f} MiB Jacobian "
                f"(limit {JACOBIAN_MAX_BYTES / 2**20:.0f} MiB)"
            )
        key_params, key_x, key_t = jax.random.split(jax.random.key(1), 3)
        weights = mlp.init(key_params, size.layer_sizes, dtype)
        x = jax.random.normal(key_x, (size.batch, size.d_in), jnp.float32).astype(dtype)
        ts = jax.random.normal(key_t, (k, size.batch, size.d_in), jnp.float32).astype(dtype)
        tlist = list(ts)
        fns = jitted()
        shape_key = (size.name, params["dtype"])
        metrics: dict[str, Any] = {"held_bytes": 0}

        if strategy == "vmap_jvp":
            targets = [
                CompileTarget(
                    "vmap_jvp", ("vmap_jvp", *shape_key, k), fns["vmap_jvp"], (weights, x, ts)
                )
            ]
            call, make_state = _call_vmap_jvp(fns), lambda: (weights, x, ts)
        elif strategy == "jvp_loop":
            targets = [
                CompileTarget("jvp", ("jvp", *shape_key), fns["jvp"], (weights, x, tlist[0]), k)
            ]
            call, make_state = _call_jvp_loop(fns), lambda: (weights, x, tlist)
        elif strategy == "jacfwd":
            targets = [
                CompileTarget("jacfwd", ("jacfwd", *shape_key, k), fns["jacfwd"], (weights, x, ts))
            ]
            call, make_state = _call_jacfwd(fns), lambda: (weights, x, ts)
            metrics["held_bytes"] = jac_bytes
        else:
            f_lin = jax.eval_shape(_linearize, weights, x)[1]
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
            targets = [lin_target, apply_target]
            metrics["held_bytes"] = _abstract_bytes(f_lin)
            if strategy == "linearize":
                call, make_state = _call_linearize(fns), lambda: (weights, x, tlist)
            else:
                call = _call_linearize_apply(fns)

                def make_state() -> Any:
                    return (fns["linearize"](weights, x)[1], tlist)

        def check() -> dict[str, Any]:
            return _gate(strategy, call, make_state(), weights, x, ts, params["dtype"])

        return Built(
            targets=targets, call=call, make_state=make_state, check=check, metrics=metrics
        )


def _abstract_bytes(tree: Any) -> int:
    return sum(int(leaf.size) * leaf.dtype.itemsize for leaf in jax.tree.leaves(tree))


def _call_vmap_jvp(fns: dict[str, Any]) -> Callable[[Any], Any]:
    vmap_jvp = fns["vmap_jvp"]
    return lambda s: vmap_jvp(*s)


def _call_jacfwd(fns: dict[str, Any]) -> Callable[[Any], Any]:
    jac = fns["jacfwd"]
    return lambda s: jac(*s)


def _call_jvp_loop(fns: dict[str, Any]) -> Callable[[Any], Any]:
    jvp = fns["jvp"]

    def call(s: Any) -> list[jax.Array]:
        weights, x, tangents = s
        return [jvp(weights, x, t)[1] for t in tangents]

    return call


def _call_linearize(fns: dict[str, Any]) -> Callable[[Any], Any]:
    lin, apply = fns["linearize"], fns["apply"]

    def call(s: Any) -> list[jax.Array]:
        weights, x, tangents = s
        f_lin = lin(weights, x)[1]
        return [apply(f_lin, t) for t in tangents]

    return call


def _call_linearize_apply(fns: dict[str, Any]) -> Callable[[Any], Any]:
    apply = fns["apply"]

    def call(s: Any) -> list[jax.Array]:
        f_lin, tangents = s
        return [apply(f_lin, t) for t in tangents]

    return call


def _gate(
    strategy: str,
    call: Callable[[Any], Any],
    state: Any,
    weights: mlp.Params,
    x: jax.Array,
    ts: jax.Array,
    dtype: str,
) -> dict[str, Any]:
    """Agreement with plain (unjitted) ``jax.jvp`` and ``vmap(jvp)``; bad-shape errors."""
    fns = jitted()
    bad = ts[..., :-1]
    for label, fn, args in (
        ("vmap_jvp", fns["vmap_jvp"], (weights, x, bad)),
        ("jvp", fns["jvp"], (weights, x, bad[0])),
    ):
        try:
            fn(*args)
        except TangentShapeError:
            continue
        raise GateFailure(f"{label} with a wrong-shape tangent did not raise TangentShapeError")

    got = (
        jnp.stack(call(state))
        if strategy in ("linearize", "linearize_apply", "jvp_loop")
        else call(state)
    )
    n = min(REFERENCE_TANGENTS, ts.shape[0])
    f = functools.partial(mlp.forward, weights)
    plain = jnp.stack([jax.jvp(f, (x,), (ts[i],))[1] for i in range(n)])
    vs_plain = check_close(f"{strategy} vs plain jvp", got[:n], plain, dtype)
    # Unjitted, so the gate never compiles (and warms) another strategy's program.
    plain_vmap = jax.vmap(lambda t: jax.jvp(f, (x,), (t,))[1])(ts)
    vs_vmap = check_close(f"{strategy} vs vmap_jvp", got, plain_vmap, dtype)
    return {
        "rtol": vs_plain["rtol"],
        "atol": vs_plain["atol"],
        "max_abs_err_vs_plain": vs_plain["max_abs_err"],
        "max_abs_err_vs_vmap_jvp": vs_vmap["max_abs_err"],
        "reference_tangents": n,
    }
