"""jaxbench: honest timing of warmed JAX workloads.

The public surface is small: workloads (``jaxbench.workloads``), the measurement harness
(``jaxbench.measure``), the result records (``jaxbench.results``) and the runner behind
``jaxbench run`` (``jaxbench.runner``).
"""

__version__ = "0.1.0"
