"""jaxbench: honest timing of warmed JAX workloads.

The public surface is small: workloads (``jaxbench.workloads``), the measurement harness
(``jaxbench.measure``), the record store (``jaxbench.store``) and the runner behind
``jaxbench run`` (``jaxbench.runner``).
"""

__version__ = "0.1.0"
