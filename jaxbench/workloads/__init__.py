"""Workloads: what is timed. No timing code lives here."""

from jaxbench.workloads.base import Built, GateFailure, NotApplicable, Workload
from jaxbench.workloads.forward_mode import ForwardMode
from jaxbench.workloads.sizes import DTYPES, SIZES, MLPSize
from jaxbench.workloads.train_step import TrainStep

WORKLOADS: dict[str, Workload] = {w.name: w for w in (TrainStep(), ForwardMode())}


def get_workload(name: str) -> Workload:
    """Look up a workload by name; ``ValueError`` lists the known ones."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}") from None


__all__ = [
    "DTYPES",
    "SIZES",
    "WORKLOADS",
    "Built",
    "ForwardMode",
    "GateFailure",
    "MLPSize",
    "NotApplicable",
    "TrainStep",
    "Workload",
    "get_workload",
]
