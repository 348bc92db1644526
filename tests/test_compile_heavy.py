"""The compile-heavy family: gated op by op, its program size, a wrong jitted path caught."""

from __future__ import annotations

import jax
import pytest

from jaxbench.prepared import prepare
from jaxbench.workloads import GateFailure, compile_heavy, get_workload


def _case(length=8, depth=1):
    return {"length": length, "depth": depth, "dtype": "float32"}


@pytest.mark.parametrize(("length", "depth"), [(8, 0), (8, 2)])
def test_the_program_passes_its_gate_and_counts_its_ops(length, depth):
    case = prepare("compile", _case(length, depth), "cpu", keep=False)
    assert case.gate["rtol"] == 1e-5
    assert case.metrics["ops"] == length * 2**depth
    assert case.stats.compile_s > 0 and case.call_once().shape == (compile_heavy.WIDTH,)


def test_a_wrong_jitted_program_or_a_silent_bad_shape_fails_the_gate(monkeypatch):
    spec = get_workload("compile")
    other = jax.jit(lambda x: compile_heavy.program(x, 8, 0))  # depth 0, not 1
    monkeypatch.setattr(compile_heavy, "jitted", lambda length, depth: other)
    with pytest.raises(GateFailure, match=r"jit vs op by op\): leaf \(root\) differs"):
        spec.build(_case()).check()
    lenient = jax.jit(lambda x: x)
    monkeypatch.setattr(compile_heavy, "jitted", lambda length, depth: lenient)
    with pytest.raises(GateFailure, match="did not raise ProgramShapeError"):
        spec.build(_case()).check()


def test_bad_compile_parameters_are_named():
    spec = get_workload("compile")
    for bad, message in (({"length": 0}, "length must be an integer in"),
                         ({"depth": 9}, "depth must be an integer in"),
                         ({"dtype": "float64"}, "unknown dtype 'float64'")):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            spec.validate(_case() | bad)
