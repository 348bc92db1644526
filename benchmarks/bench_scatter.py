"""asv benchmarks of scatter-add, segment_sum, gather and the embedding gradient.

Made from the family's declared suites (:mod:`benchmarks.common`).
The ops, their index draws, their correctness gate and all measurement come from
:mod:`jaxbench` (:mod:`jaxbench.workloads.scatter`).
"""

from benchmarks.common import asv_classes

globals().update(asv_classes(__name__))
