"""Backend names that ``--backend`` and profiles accept. Imports no JAX."""

from __future__ import annotations

BACKENDS = ("default", "cpu", "gpu", "cuda", "rocm", "tpu")

JAX_PLATFORMS = {"cpu": "cpu", "cuda": "cuda", "rocm": "rocm", "tpu": "tpu"}
"""``JAX_PLATFORMS`` value that limits JAX to one platform (JAX docs, "Supported platforms").

``default`` and ``gpu`` set none: ``gpu`` may be CUDA or ROCm, and JAX fails at start-up when a
platform named in ``JAX_PLATFORMS`` has no plugin.
"""


def check_backend(backend: str) -> str:
    """Return ``backend`` if it is one of :data:`BACKENDS`; else ``ValueError`` listing them."""
    if backend not in BACKENDS:
        raise ValueError(f"--backend {backend!r}: unknown backend {backend!r}; choose from "
                         f"{', '.join(BACKENDS)}")  # fmt: skip
    return backend
