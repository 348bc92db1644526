"""The loop family: gated against a float64 recurrence, and its scaling over the trip count."""

from __future__ import annotations

import numpy as np
import pytest

from jaxbench.inference.scaling import fit_exponent
from jaxbench.measure import TimingConfig
from jaxbench.prepared import prepare
from jaxbench.workloads import GateFailure, get_workload, loops

TIMING = TimingConfig(budget_s=0.0, min_samples=15, max_samples=15, warmup_calls=2)


def _case(body, mode="plain", trip=64):
    return {"trip": trip, "body": body, "mode": mode, "dtype": "float32"}


@pytest.mark.parametrize(
    ("body", "mode"),
    [(b, "plain") for b in loops.BODIES] + [("at_set", "grad"), ("scan_stack", "linearize")],
)
def test_every_body_and_mode_passes_its_gate(body, mode):
    case = prepare("loop", _case(body, mode), "cpu", keep=False)
    assert case.gate["rtol"] == 1e-5 and case.gate["max_abs_err"] < 1e-4
    out = np.asarray(case.call_once())
    want = loops.reference(*(np.asarray(a) for a in _inputs(64)))[mode]
    assert out.shape == want.shape


def _inputs(trip):
    return loops.inputs(trip)


def test_the_reference_gradient_and_tangent_match_jax(monkeypatch):
    import jax

    x, w, v = _inputs(16)
    ref = loops.reference(np.asarray(x), np.asarray(w), np.asarray(v))
    grad = jax.grad(lambda w: loops.run("at_set", x, w).sum())(w)
    tangent = jax.jvp(lambda w: loops.run("at_set", x, w), (w,), (v,))[1]
    np.testing.assert_allclose(grad, ref["grad"], rtol=1e-5)
    np.testing.assert_allclose(tangent, ref["linearize"], rtol=1e-5, atol=1e-6)


def test_a_wrong_jitted_path_or_a_silent_bad_shape_fails_the_gate(monkeypatch):
    import jax

    spec = get_workload("loop")
    fns = dict(loops.jitted("dynamic_update_slice"))
    wrong = fns | {"plain": jax.jit(lambda x, w: loops.run("at_set", x, w) * 1.001)}
    monkeypatch.setattr(loops, "jitted", lambda body: wrong)
    built = spec.build(_case("dynamic_update_slice"))
    with pytest.raises(GateFailure, match=r"jit vs float64 recurrence\): leaf 0 differs"):
        built.check()
    lenient = fns | {"plain": jax.jit(lambda x, w: jax.numpy.zeros_like(x))}
    monkeypatch.setattr(loops, "jitted", lambda body: lenient)
    with pytest.raises(GateFailure, match="wrong shape did not raise LoopShapeError"):
        spec.build(_case("dynamic_update_slice")).check()


def test_bad_loop_parameters_are_named():
    spec = get_workload("loop")
    for bad, message in (({"trip": 0}, "trip must be an integer"),
                         ({"body": "while"}, "unknown body 'while'"),
                         ({"mode": "vjp"}, "unknown mode 'vjp'"),
                         ({"dtype": "bfloat16"}, "unknown dtype 'bfloat16'")):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            spec.validate(_case("at_set") | bad)
    with pytest.raises(ValueError, match="--param trip='many': expected an integer"):
        spec.parse_param("trip", "many")


def _exponent(body, mode, trips):
    medians = []
    for trip in trips:
        case = prepare("loop", _case(body, mode, trip), "cpu", keep=False)
        medians.append(float(np.median(case.steady_state(TIMING).samples_s)))
    return fit_exponent({"this process": (list(trips), medians)})


@pytest.mark.alone
def test_in_place_updates_scale_linearly_and_a_full_copy_per_step_quadratically():
    linear = _exponent("at_set", "plain", (1024, 4096, 16384))
    assert 0.8 <= linear.exponent <= 1.25, linear
    quadratic = _exponent("shift", "plain", (256, 512, 1024))
    assert 1.7 <= quadratic.exponent <= 2.3, quadratic
