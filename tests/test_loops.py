"""The loop family: gated against a float64 recurrence (its scaling: test_quiet_machine.py)."""

from __future__ import annotations

import numpy as np
import pytest

from jaxbench.prepared import prepare
from jaxbench.workloads import GateFailure, get_workload, loops


def _case(body, mode="plain", trip=64, width=64):
    return {"trip": trip, "body": body, "mode": mode, "width": width, "dtype": "float32"}


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
    with pytest.raises(GateFailure, match=r"jit vs float64 recurrence\): leaf \(root\) differs"):
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


@pytest.mark.parametrize(("body", "mode"), [("at_set", "plain"), ("dynamic_update_slice", "grad")])
def test_narrow_rows_pass_the_gate_and_write_rows_of_their_width(body, mode):
    case = prepare("loop", _case(body, mode, trip=32, width=1), "cpu", keep=False)
    want = loops.reference(*(np.asarray(a) for a in loops.inputs(32, 1)))[mode]
    shape = (32, 1) if mode == "plain" else (1,)
    assert np.asarray(case.call_once()).shape == want.shape == shape
    assert case.metrics["buffer_bytes"] == 32 * 4


def test_the_quick_grid_has_a_narrow_width_and_the_full_grid_four():
    spec = get_workload("loop")
    assert 1 in spec.grid(True)["width"] and 64 in spec.grid(True)["width"]
    assert spec.grid(False)["width"] == [1, 4, 16, 64]
    with pytest.raises(ValueError, match="width must be an integer"):
        spec.validate(_case("at_set", width=0))
    spec.validate({k: v for k, v in _case("at_set").items() if k != "width"})  # an old record


def test_body_aliases_are_accepted_and_named_in_the_error():
    spec = get_workload("loop")
    assert spec.parse_param("body", "dus") == "dynamic_update_slice"
    assert spec.parse_param("body", "scan") == "scan_stack"
    assert spec.parse_param("body", "at_set") == "at_set"
    with pytest.raises(ValueError, match=r"dynamic_update_slice \(alias dus\), scan_stack \(alias"):
        spec.validate(_case("while"))
