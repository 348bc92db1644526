"""The ``jaxbench`` command: one typer app; each command module adds its own commands."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

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
from jaxbench.cli.options import INTERRUPTION_SAID, fail

#: click's base class of usage errors, whether typer vendors click (0.2x) or imports it.
CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class OneLineErrors(TyperGroup):
    """The command group, with each usage error on one line of stderr.

    An unknown command or option, or a bad or missing value, prints ``error: jaxbench compare:
    No such option: --nope (see jaxbench compare --help)`` and exits with click's status for it
    (2), instead of typer's usage line, hint and boxed panel. ``jaxbench`` alone still prints
    the help.
    """

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        """Parse the group's own options (as :class:`typer.core.TyperGroup`)."""
        with _one_line(lambda: "jaxbench"):
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        """Find the command, parse its options and run it (as :class:`typer.core.TyperGroup`)."""
        # An error without a context (an option that lacks its value) is the command's.
        with _one_line(lambda: " ".join(filter(None, [ctx.command_path, ctx.invoked_subcommand]))):
            return super().invoke(ctx)


@contextlib.contextmanager
def _one_line(command: Callable[[], str]) -> Iterator[None]:
    try:
        yield
    except CLICK_ERROR as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # typer's: the help, already printed
            raise
        where = getattr(e, "ctx", None)
        path = where.command_path if where is not None else command()
        message = e.format_message().rstrip(".") + _given(e)
        raise fail(f"{path}: {message} (see {path} --help)", e.exit_code) from None


def _given(error: Exception) -> str:
    """``" (got 'x')"`` for a value that typer checked with pydantic, else ``""``.

    Pydantic's message does not repeat the value (``--threshold x``: "Input should be a valid
    number"); an option with a ``parser`` of its own names it already.
    """
    cause = error.__cause__
    errors = cause.errors() if type(cause).__name__ == "ValidationError" else []
    return f" (got {errors[0]['input']!r})" if errors and "input" in errors[0] else ""


app = typer.Typer(
    cls=OneLineErrors,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="markdown",
    help="Honest timing of warmed JAX workloads.",
)


def _say_version(value: bool) -> None:
    """``--version``: jaxbench's, and the JAX and jaxlib installed (read, not imported)."""
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    typer.echo(f"jaxbench {of('jaxbench')} (jax {of('jax')}, jaxlib {of('jaxlib')})")
    raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_say_version, is_eager=True, metavar="",
                     help="Print jaxbench's version and the JAX and jaxlib installed, and exit."),
    ] = False,
) -> None:  # fmt: skip
    """Honest timing of warmed JAX workloads."""


for _module in (run, cluster, compare, calibrate, drift, report, notebook, steps, explain, bisect,
                review):  # fmt: skip
    _module.register(app)


#: Seconds a command may spend ending after Ctrl-C (closing workers, writing what it kept)
#: before it is ended anyway.
INTERRUPT_GRACE_S = 30.0


def main() -> None:
    """Entry point of the ``jaxbench`` command and of ``python -m jaxbench``.

    Ctrl-C (SIGINT) always ends the command with exit status 130, and SIGTERM (``timeout``,
    ``docker stop``, a cancelled CI job: often sent to this process alone) with 143. The first
    one raises ``KeyboardInterrupt`` as Python does for SIGINT, so each command keeps what it
    measured, ends the processes it started and says so. Should that exception be lost (raised
    inside a callback that swallows it, such as a garbage-collection hook of JAX's) the command
    still exits 130 (143) when it ends; should it not end within :data:`INTERRUPT_GRACE_S`, or
    on a second signal, the process ends at once with that status (what was written to disk
    stays: every writer writes whole lines or whole files).

    The current folder is on the import path, as ``python -m`` puts it, so a workload module
    there (``-w mymodule:factory``) imports whichever way the command was started; the
    console script alone would leave it out.
    """
    with contextlib.suppress(OSError):  # a working directory that was removed: nothing to add
        if (here := os.getcwd()) not in sys.path:
            sys.path.append(here)  # last: nothing installed is shadowed by a local folder
    interrupted = threading.Event()
    names = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
    received: list[int] = []

    def status() -> int:
        return 128 + received[0]  # the shell's status of a process ended by that signal

    def give_up() -> None:
        sys.stderr.write(f"error: interrupted; still ending after {INTERRUPT_GRACE_S:g} s, so "
                         "stopped: what was written to disk is kept\n")  # fmt: skip
        sys.stderr.flush()
        os._exit(status())

    def on_signal(signum: int, frame: object) -> None:
        if interrupted.is_set():
            os._exit(status())
        received.append(signum)
        interrupted.set()
        timer = threading.Timer(INTERRUPT_GRACE_S, give_up)
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt

    for signum in names:
        signal.signal(signum, on_signal)
    try:
        app()
    except SystemExit:
        if not interrupted.is_set():
            raise
        if not INTERRUPTION_SAID.is_set():  # e.g. typer's own exit 130, which says nothing
            sys.stderr.write(f"error: interrupted ({names[received[0]]}); what was written to "
                             "disk is kept\n")  # fmt: skip
        raise SystemExit(status()) from None
