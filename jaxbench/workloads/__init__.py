"""Workloads: what is timed. No timing code lives here."""

from jaxbench.measure.harness import CompileTarget
from jaxbench.workloads.base import (
    GateFailure,
    LeafTolerance,
    NotApplicable,
    Workload,
    adam_first_step,
)
from jaxbench.workloads.collectives import Collectives
from jaxbench.workloads.compile_heavy import CompileHeavy
from jaxbench.workloads.forward_mode import ForwardMode
from jaxbench.workloads.loops import Loops
from jaxbench.workloads.scatter import Scatter
from jaxbench.workloads.sizes import DTYPES, SIZES, MLPSize
from jaxbench.workloads.step import Step
from jaxbench.workloads.train_step import TrainStep
from jaxbench.workloads.transformer import Transformer
from jaxbench.workloads.user import UserWorkload, find

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        TrainStep(),
        ForwardMode(),
        Transformer(),
        Loops(),
        Scatter(),
        CompileHeavy(),
        Collectives(),
    )
}


def get_workload(name: str) -> Workload:
    """A built-in workload by name, else a user's (:func:`jaxbench.workloads.user.find`).

    Raises:
        ValueError: Unknown name (the message lists the built-in and installed ones), or a user
            workload that cannot be imported.
    """
    if name in WORKLOADS:
        return WORKLOADS[name]
    return find(name, known=tuple(WORKLOADS))


__all__ = [
    "DTYPES",
    "SIZES",
    "WORKLOADS",
    "Collectives",
    "CompileHeavy",
    "CompileTarget",
    "ForwardMode",
    "GateFailure",
    "LeafTolerance",
    "Loops",
    "MLPSize",
    "NotApplicable",
    "Scatter",
    "Step",
    "TrainStep",
    "Transformer",
    "UserWorkload",
    "Workload",
    "adam_first_step",
    "get_workload",
]
