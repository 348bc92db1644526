"""How far each drift output is from a float64 computation of the same inputs.

Evidence for :data:`jaxbench.drift.tolerance.DRIFT_TOLERANCES`: two faithful implementations
(another JAX version, fusion or backend) each within E of the float64 result differ by at most
2E, so a tolerance should sit well above 2E. Prints, per workload, dtype and output, the largest
error over all valid sets in units of the dtype's epsilon: absolute (over ``scale = max(1,
max |float64 result|)``) and relative (elements at least 0.1 of the largest), and the share of
the drift bound that 2E uses (``2E/bound``; below 1 means two such implementations agree).

The transformer's float64 computation widens its norms, softmax and logits too
(:data:`jaxbench.workloads.lm.WIDE`). Each set's bound is the one a check applies: its dtype at
its workload's reduction length and bfloat16 floor (:func:`jaxbench.drift.check.set_method`).

Usage: ``.venv/bin/python scripts/drift_tolerances.py`` (CPU, about a minute).
"""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

from jaxbench.drift.check import set_method  # noqa: E402
from jaxbench.drift.sets import regression_sets  # noqa: E402
from jaxbench.workloads import lm  # noqa: E402


def main() -> None:
    worst: dict[tuple[str, str, str], list[float]] = {}
    for s in regression_sets():
        if s.expect_error is not None:
            continue
        method = set_method(s.workload, s.params)
        lm.WIDE = jnp.float32
        low = method.compute(s.inputs, s.dtype)
        wide = {k: v.astype(np.float64) if v.dtype.kind == "f" or v.dtype.name == "bfloat16"
                else v for k, v in s.inputs.items()}  # fmt: skip
        lm.WIDE = jnp.float64
        high = method.compute(wide, "float64")
        eps = float(ml_dtypes.finfo(np.dtype(s.dtype)).eps)
        tol = method.tolerance(s.dtype)
        for name, got in low.items():
            a = np.asarray(got, np.float64)
            b = np.asarray(high[name], np.float64)
            scale = max(1.0, float(np.abs(b).max()))
            diff = np.abs(a - b)
            big = np.abs(b) >= 0.1 * np.abs(b).max()
            rel = float((diff[big] / np.abs(b[big])).max()) if big.any() and b.any() else 0.0
            share = float((2 * diff / (tol["atol"] * scale + tol["rtol"] * np.abs(b))).max())
            key = (s.workload, s.dtype, name.split(".")[0])
            old = worst.get(key, [0.0, 0.0, 0.0])
            worst[key] = [max(old[0], diff.max() / scale / eps), max(old[1], rel / eps),
                          max(old[2], share)]  # fmt: skip
    print(f"{'workload':12} {'dtype':9} {'output':13} {'abs/scale':>10} {'rel':>8} {'2E/bound':>9}")
    for (workload, dtype, name), (ab, rel, share) in worst.items():
        print(f"{workload:12} {dtype:9} {name:13} {ab:9.2f}e {rel:7.2f}e {share:9.3f}")
    print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}; e = the dtype's epsilon")


if __name__ == "__main__":
    main()
