"""Failures that must not grow or hang: a kept preparation error, a worker that stops answering,
a Ctrl-C that lands where Python swallows it."""

import subprocess
import sys
import textwrap
import traceback

import pytest

from jaxbench import prepared
from jaxbench.interleave.session import Worker, WorkerDied
from jaxbench.workloads import GateFailure


def test_a_kept_preparation_error_is_raised_afresh_each_time(monkeypatch):
    def fails(*args, **kwargs):
        raise GateFailure("loss is not finite")

    monkeypatch.setattr(prepared, "_prepare_now", fails)
    monkeypatch.setattr(prepared, "_PREPARED", {})
    params = {"size": "tiny", "dtype": "float32", "optimizer": "sgd", "donate": True}
    depths = []
    for _ in range(3):
        with pytest.raises(GateFailure, match="loss is not finite") as err:
            prepared.prepare("train_step", params, "cpu")
        depths.append(len(traceback.extract_tb(err.value.__traceback__)))
    assert depths[0] == depths[1] == depths[2]
    assert len(prepared._PREPARED) == 1  # kept, not prepared again


def test_a_worker_that_gives_no_answer_is_killed_and_named(tmp_path):
    hung = tmp_path / "python"
    hung.write_text("#!/bin/sh\necho 'loading...' >&2\nexec sleep 600\n")
    hung.chmod(0o755)
    worker = Worker(str(hung), "cpu", timeout_s=0.5)
    try:
        with pytest.raises(WorkerDied, match=r"gave no answer to 'ping' within 0.5 s; killed"):
            worker.request(op="ping")
        assert worker._proc.wait(timeout=30) != 0
    finally:
        worker.close()


SWALLOWED = textwrap.dedent(
    """
    import gc, os, signal, sys
    from jaxbench.cli import main
    fired = []
    def hook(phase, info):
        # Ctrl-C arrives while a garbage-collection callback runs (as JAX's do): the handler's
        # KeyboardInterrupt is raised inside it, and Python only prints it as ignored.
        if not fired and signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            fired.append(1)
            os.kill(os.getpid(), signal.SIGINT)
    gc.callbacks.append(hook)
    sys.argv = ["jaxbench", "list"]
    main()
    """
)


def test_a_ctrl_c_swallowed_by_a_gc_callback_still_ends_the_command_with_130():
    out = subprocess.run([sys.executable, "-c", SWALLOWED], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert "KeyboardInterrupt" in out.stderr and "Exception ignored" in out.stderr  # swallowed
    assert out.returncode == 130, out.stderr
    assert "error: interrupted (Ctrl-C); what was written to disk is kept" in out.stderr


ABORTED = textwrap.dedent(
    """
    import importlib, os, signal, sys
    cli_app = importlib.import_module("jaxbench.cli.app")  # the module, not its Typer `app`
    def command():
        # Ctrl-C early in a command that does not handle it: click's Abort ends it with 1
        try:
            os.kill(os.getpid(), signal.SIGINT)
            signal.pause()
        except KeyboardInterrupt:
            sys.exit(1)
    cli_app.app = command
    cli_app.main()
    """
)


def test_a_ctrl_c_that_ends_a_command_with_another_status_is_said_and_exits_130():
    out = subprocess.run([sys.executable, "-c", ABORTED], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 130, out.stderr
    assert out.stderr.strip() == "error: interrupted (Ctrl-C); what was written to disk is kept"


TERMINATED = ABORTED.replace("signal.SIGINT", "signal.SIGTERM")


def test_a_sigterm_is_an_interrupt_too_and_exits_143():
    """``timeout``, ``docker stop`` or a cancelled CI job send SIGTERM to the command alone: it
    ends as on Ctrl-C (its ``KeyboardInterrupt`` path ends the processes it started and says
    what it kept) with the shell's status of a terminated process, not killed on the spot."""
    assert "signal.SIGTERM" in TERMINATED
    out = subprocess.run([sys.executable, "-c", TERMINATED], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 143, out.stderr
    assert out.stderr.strip() == "error: interrupted (SIGTERM); what was written to disk is kept"


SILENT = ABORTED.replace("sys.exit(1)", "sys.exit(130)")  # as typer ends a Ctrl-C, saying nothing


def test_a_ctrl_c_that_a_command_does_not_report_is_said_once():
    out = subprocess.run([sys.executable, "-c", SILENT], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 130, out.stderr
    assert out.stderr.strip() == "error: interrupted (Ctrl-C); what was written to disk is kept"


def test_a_command_that_said_it_was_interrupted_gets_no_second_line():
    said = SILENT.replace(
        "sys.exit(130)",
        "from jaxbench.cli.options import fail; fail('interrupted after 2 of 3', 130); "
        "sys.exit(130)",
    )
    assert said != SILENT
    out = subprocess.run([sys.executable, "-c", said], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 130, out.stderr
    assert out.stderr.strip() == "error: interrupted after 2 of 3"
