"""asv benchmarks of compile time: programs of many distinct ops in nested control flow.

Made from the family's declared suites (:mod:`benchmarks.common`).
The program, its gate and the compile figures come from :mod:`jaxbench`
(:mod:`jaxbench.workloads.compile_heavy`, measured cold by the core runner in ``setup_cache``).
"""

from benchmarks.common import asv_classes

globals().update(asv_classes(__name__))
