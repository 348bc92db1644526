"""The ``jaxbench`` command: one typer app; each command module adds its own commands."""

from __future__ import annotations

import typer

from jaxbench.cli import (
    bisect,
    calibrate,
    cluster,
    compare,
    drift,
    explain,
    notebook,
    report,
    review,
    run,
    steps,
)

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Honest timing of warmed JAX workloads."
)

for _module in (run, cluster, compare, calibrate, drift, report, notebook, steps, explain, bisect,
                review):  # fmt: skip
    _module.register(app)


def main() -> None:
    """Entry point for ``python -m jaxbench``."""
    app()
