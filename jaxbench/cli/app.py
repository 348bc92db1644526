"""The ``jaxbench`` command: one typer app; each command module adds its own commands."""

from __future__ import annotations

import os
import signal
import sys
import threading

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
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="markdown",
    help="Honest timing of warmed JAX workloads.",
)

for _module in (run, cluster, compare, calibrate, drift, report, notebook, steps, explain, bisect,
                review):  # fmt: skip
    _module.register(app)


#: Seconds a command may spend ending after Ctrl-C (closing workers, writing what it kept)
#: before it is ended anyway.
INTERRUPT_GRACE_S = 30.0


def main() -> None:
    """Entry point of the ``jaxbench`` command and of ``python -m jaxbench``.

    Ctrl-C (SIGINT) always ends the command with exit status 130. The first one raises
    ``KeyboardInterrupt`` as Python does, so each command keeps what it measured and says so.
    Should that exception be lost (raised inside a callback that swallows it, such as a
    garbage-collection hook of JAX's) the command still exits 130 when it ends; should it not
    end within :data:`INTERRUPT_GRACE_S`, or on a second Ctrl-C, the process ends at once with
    130 (what was written to disk stays: every writer writes whole lines or whole files).
    """
    interrupted = threading.Event()

    def give_up() -> None:
        sys.stderr.write(f"error: interrupted; still ending after {INTERRUPT_GRACE_S:g} s, so "
                         "stopped: what was written to disk is kept\n")  # fmt: skip
        sys.stderr.flush()
        os._exit(130)

    def on_sigint(signum: int, frame: object) -> None:
        if interrupted.is_set():
            os._exit(130)
        interrupted.set()
        timer = threading.Timer(INTERRUPT_GRACE_S, give_up)
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    try:
        app()
    except SystemExit as exc:
        if interrupted.is_set() and exc.code != 130:
            if exc.code in (0, None):
                sys.stderr.write("error: interrupted (Ctrl-C); what was written to disk is "
                                 "kept\n")  # fmt: skip
            raise SystemExit(130) from None
        raise
