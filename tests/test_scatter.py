"""The scatter family: gated against NumPy, contended indices, a wrong jitted path caught."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbench.prepared import prepare
from jaxbench.workloads import GateFailure, get_workload, scatter


def _case(op, contention="zipf", rows=256, n=1024):
    return {"rows": rows, "n": n, "contention": contention, "op": op, "dtype": "float32"}


@pytest.mark.parametrize("contention", scatter.CONTENTION)
@pytest.mark.parametrize("op", scatter.OPS)
def test_every_op_passes_its_gate_under_every_contention(op, contention):
    case = prepare("scatter", _case(op, contention), "cpu", keep=False)
    assert case.gate["rtol"] == 1e-5 and case.gate["atol"] >= 1e-6
    out = case.call_once()
    assert out.shape == ((1024, scatter.WIDTH) if op == "gather" else (256, scatter.WIDTH))


def test_contention_concentrates_the_updates():
    rows, n = 4096, 16384
    top_share = {c: np.bincount(scatter.indices(c, rows, n), minlength=rows).max() / n
                 for c in scatter.CONTENTION}  # fmt: skip
    assert top_share["one"] == 1.0
    assert top_share["zipf"] > 0.1 > 20 * top_share["uniform"]
    built = get_workload("scatter").build(_case("scatter_add", "one"))
    assert built.metrics == {"distinct_rows": 1, "updates_per_row": 1024.0}


def test_the_float32_sum_widens_atol_only_as_far_as_its_rounding():
    case = prepare("scatter", _case("segment_sum", "one", n=65536), "cpu", keep=False)
    spread = case.gate["float32_sum_spread"]
    assert spread > 0 and case.gate["atol"] > 1e-6  # one row sums 65536 updates
    assert case.gate["max_abs_err"] < 1.0  # a dropped update (about 1) would fail


def test_a_dropped_update_or_a_silent_bad_shape_fails_the_gate(monkeypatch):
    spec = get_workload("scatter")
    drop = jax.jit(lambda t, i, u: scatter.apply("scatter_add", t, i[1:], u[1:]))
    monkeypatch.setattr(scatter, "jitted", lambda op: drop)
    with pytest.raises(GateFailure, match=r"jit vs float64 NumPy\): leaf \(root\) differs"):
        spec.build(_case("scatter_add", "uniform")).check()
    lenient = jax.jit(lambda t, i, u: jnp.zeros_like(t))
    monkeypatch.setattr(scatter, "jitted", lambda op: lenient)
    with pytest.raises(GateFailure, match="did not raise ScatterShapeError"):
        spec.build(_case("scatter_add")).check()


def test_bad_scatter_parameters_are_named():
    spec = get_workload("scatter")
    for bad, message in (({"n": 0}, "n must be an integer"),
                         ({"rows": 2.5}, "rows must be an integer"),
                         ({"op": "scatter_max"}, "unknown op 'scatter_max'"),
                         ({"contention": "hot"}, "unknown contention 'hot'")):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            spec.validate(_case("gather") | bad)
    with pytest.raises(ValueError, match="--param n='many': expected an integer"):
        spec.parse_param("n", "many")
