"""asv benchmarks of every registered family's suites that no other ``bench_*`` file claims.

A new family declares its suites with itself (:class:`jaxbench.workloads.base.AsvSuite`); they
appear here as ``bench_workloads.<class>.<method>`` with no file to edit.
"""

from benchmarks.common import asv_classes

globals().update(asv_classes(__name__))
