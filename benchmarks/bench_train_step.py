"""asv benchmarks of the jitted MLP train step (SGD, params donated) across sizes and dtypes.

Made from the family's declared suites (:mod:`benchmarks.common`).
The step, its correctness gate and all measurement come from :mod:`jaxbench`.
"""

from benchmarks.common import asv_classes

globals().update(asv_classes(__name__))
