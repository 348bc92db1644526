"""Numerical drift of the workloads across JAX versions and backends, judged by tolerance.

An upgrade that is faster but changes the loss beyond tolerance is a finding. Regression sets
(:mod:`jaxbench.drift.sets`: standard, single, zeros, boundary and invalid_shape inputs of each
family that declares them with itself, :class:`~jaxbench.workloads.regression.DriftSets`) are
computed once and saved as a reference (:mod:`jaxbench.drift.reference`); a check
(:mod:`jaxbench.drift.check`) recomputes them under the current JAX and backend and compares
each output with the dtype's tolerance (:mod:`jaxbench.drift.tolerance`), writing one JSON
Lines file of :class:`~jaxbench.store.drift.DriftRow`. On the command line: ``jaxbench drift``.

The files are kinds of the store (:mod:`jaxbench.store.drift`); the analysis reads them
(:func:`jaxbench.analysis.drift.load_drift`). Importing this package loads no JAX: it gives the
tolerances. Saving and checking import JAX::

    from jaxbench.drift.check import check_drift, save_reference
"""

from jaxbench.drift.tolerance import DRIFT_TOLERANCES, compare

__all__ = ["DRIFT_TOLERANCES", "compare"]
