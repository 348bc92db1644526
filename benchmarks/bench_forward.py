"""asv benchmarks of K Jacobian-vector products: linearize vs vmap(jvp) vs a jvp loop.

Made from the family's declared suites (:mod:`benchmarks.common`).
The strategies, their correctness gate and all measurement come from :mod:`jaxbench`
(:mod:`jaxbench.workloads.forward_mode`).
"""

from benchmarks.common import asv_classes

globals().update(asv_classes(__name__))
