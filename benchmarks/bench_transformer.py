"""asv benchmarks of the decoder LM train step (AdamW, state donated) across sizes and dtypes.

Made from the family's declared suites (:mod:`benchmarks.common`).
The model, its correctness gate and all measurement come from :mod:`jaxbench`
(:mod:`jaxbench.workloads.transformer`). GPU sizes are n/a on a CPU.
"""

from benchmarks.common import asv_classes

globals().update(asv_classes(__name__))
