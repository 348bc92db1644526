"""asv benchmarks of loops writing one buffer row per step, over the trip count.

Made from the family's declared suites (:mod:`benchmarks.common`).
The loop bodies, their correctness gate and all measurement come from :mod:`jaxbench`
(:mod:`jaxbench.workloads.loops`). asv's ``compare`` shows each trip count apart; the scaling
exponent over them comes from ``jaxbench compare`` / ``report`` on the same records.
"""

from benchmarks.common import asv_classes

globals().update(asv_classes(__name__))
