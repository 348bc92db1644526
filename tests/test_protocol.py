"""One workload protocol: every built-in family is a factory of Steps, as a user's workload is."""

import dataclasses
import inspect

import numpy as np
import pytest
from conftest import ROOT

from jaxbench.cases import Case
from jaxbench.runner import run
from jaxbench.workloads import (
    WORKLOADS,
    Step,
    Workload,
    forward_mode,
    get_workload,
    scatter,
    train_step,
    transformer,
)

USER = "jaxbench_example_workloads:regression_step"


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_each_family_is_a_factory_whose_signature_is_its_parameters(name):
    family = WORKLOADS[name]
    assert type(family).build is Workload.build  # no family builds a case its own way
    signature = inspect.signature(family.factory)
    assert tuple(signature.parameters) == family.param_names
    assert set(family.grid(True)) == set(family.param_names)
    # every parameter has a default: records made before a parameter existed still rebuild
    assert all(p.default is not inspect.Parameter.empty for p in signature.parameters.values())


def test_a_family_and_a_user_factory_go_through_the_same_step_from_param_to_record(
    tmp_path, fast_timing, monkeypatch
):
    seen = []
    check = Step.check

    def spy(self, name="step"):
        seen.append((name, type(self).__name__))
        return check(self, name)

    monkeypatch.setattr(Step, "check", spy)
    examples = str(ROOT / "examples" / "workloads")
    monkeypatch.syspath_prepend(examples)
    monkeypatch.setenv("PYTHONPATH", examples)
    family, user = get_workload("train_step"), get_workload(USER)
    cases = [
        Case("train_step", {**{k: v[0] for k, v in family.grid(True).items()},
                            "dtype": family.parse_param("dtype", "float32")}),
        Case(USER, {"width": user.parse_param("width", "16"), "batch": 32, "lr": 0.01}),
    ]  # fmt: skip
    records = run(cases, tmp_path, timing=fast_timing).records
    assert [r.status for r in records] == ["ok", "ok"], [r.error for r in records]
    assert seen == [("train_step", "Step"), (USER, "Step")]
    assert records[0].metrics.model_flops > 0  # Step.flops, recorded the same way for both
    assert records[1].params == {"width": 16, "batch": 32, "lr": 0.01}


@pytest.mark.parametrize(
    ("module", "factory"),
    [(train_step, "train_step"), (forward_mode, "forward"), (transformer, "transformer"),
     (scatter, "scatter")],
)  # fmt: skip
def test_a_familys_drift_inputs_are_its_factorys_arguments(module, factory, monkeypatch):
    made = []
    original = getattr(module, factory)

    def recording(**params):
        made.append(original(**params))
        return made[-1]

    monkeypatch.setattr(module, factory, recording)
    family = next(w for w in WORKLOADS.values() if w.factory is original)
    standard = family.drift.standard("float32")
    (step,) = made
    import jax

    args = [np.asarray(a) for a in jax.tree.leaves(step.first_args())]
    for name, array in standard.items():
        assert any(a.shape == array.shape and np.array_equal(a, array) for a in args), name


def test_a_step_that_is_not_well_formed_is_one_line_naming_the_field():
    family = WORKLOADS["compile"]
    bad = dataclasses.replace(family.factory(), programs=("not a program",))
    clone = object.__new__(type(family))
    clone.factory = lambda **_: bad
    with pytest.raises(ValueError, match=r"workload 'compile': Step.programs must hold"):
        clone.build({})
