import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jaxbench.measure import TimingConfig

ROOT = Path(__file__).resolve().parent.parent
FAST = TimingConfig(budget_s=0.0, min_samples=5, max_samples=5, warmup_calls=1)


@pytest.fixture
def fast_timing() -> TimingConfig:
    return FAST


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: int = 300):
    """Run ``python -m jaxbench ARGS`` in a fresh process; returns CompletedProcess."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "jaxbench", *args],
        cwd=cwd or ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


#: Four CPU devices in a fresh JAX process (``XLA_FLAGS``), for meshes and collectives.
def importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> str:
    """Write ``source`` as module ``name`` in ``tmp_path/src``, importable here (``sys.path``).

    Only this process's path is changed: a ``jaxbench run`` worker gets it from its parent.
    """
    folder = tmp_path / "src"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(folder))
    return name


def editable_dist_info(site: Path, name: str, project: Path, entry_points: str = "") -> Path:
    """``site/<name>-0.3.dist-info`` as pip leaves an editable install of ``project``.

    PEP 610's ``direct_url.json`` names the folder, so the project is found as a local project
    (:func:`jaxbench.workloads.source.source_of`); ``entry_points`` is the file's text, if any.
    """
    info = site / f"{name}-0.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.3\n")
    (info / "top_level.txt").write_text(f"{name}\n")
    (info / "direct_url.json").write_text(
        json.dumps({"url": project.as_uri(), "dir_info": {"editable": True}})
    )
    if entry_points:
        (info / "entry_points.txt").write_text(entry_points)
    return info


def fake_pip(monkeypatch: pytest.MonkeyPatch, imported: str, offered: str = "") -> list:
    """Stand in for the commands that build JAX-version environments (``pyenvs._run``).

    ``python -m venv`` makes its folder, ``import jax`` answers ``imported``, ``pip index
    versions`` answers ``offered`` (``"0.12.1, 0.12.0"``); anything else answers nothing.

    Returns:
        The ``(command, what)`` of every call, in order.
    """
    from jaxbench.cluster import pyenvs

    calls: list[tuple[list[str], str]] = []

    def run(cmd: list[str], what: str) -> str:
        calls.append((cmd, what))
        if cmd[1:3] == ["-m", "venv"]:
            Path(cmd[3]).mkdir(parents=True)
        if what.startswith("pip index versions"):
            return f"{cmd[5]} (1.0)\nAvailable versions: {offered}"
        return {"import jax": imported, "python": "3.13"}.get(what, "")

    monkeypatch.setattr(pyenvs, "_run", run)
    return calls


FORCE_4 = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}


def forced_json(script: str, timeout: int = 300) -> dict:
    """Run ``python -c script`` with :data:`FORCE_4`; its last line of stdout, parsed as JSON."""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **FORCE_4})  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- running in parallel (pytest-xdist: ``-n auto --dist loadfile`` in pyproject.toml) ---------
#
# A test file runs on one worker, in file order (test_slurm.py's module fixture starts one real
# Slurm cluster and checks its one queue). Files are handed out longest first, so that no worker
# is left with a long one at the end: seconds each on the 2-core VM (``--durations=0``, serial).
# The ``alone`` tests' files go before them all (``pytest_collection_modifyitems``), those tests
# first in each: they run while nothing else has started.
LONGEST_FIRST = (
    "test_quiet_machine.py",
    "test_run_traces.py",  # its op diff test runs alone too
    "test_slurm.py",  # 270
    "test_asv.py",  # 200
    "test_cluster.py",  # 190
    "test_interleave.py",  # 110
    "test_cli.py",  # 100
)


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: two workers per usable CPU (at most 8).

    Most of the suite's time is waiting on subprocesses: Slurm's scheduler and time limits, asv's
    and the sweeps' environment builds, live workers starting. Two workers a core keep the CPUs
    busy through those waits (pytest on the 2-core VM: 14.1 min with two workers, 13.1 with
    three, 11.1 with four); tests that time a busy machine still run ``alone``.
    """
    return max(2, min(8, 2 * len(os.sched_getaffinity(0))))


def _file_rank(item: pytest.Item) -> int:
    name = item.path.name
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config, items):
    """Files with ``alone`` tests first, then longest first (:data:`LONGEST_FIRST`); in each
    file its ``alone`` tests first.

    A file's tests run on one worker in this order, and every other test waits for the last
    ``alone`` one: a test of the same file placed before it would wait for a test queued behind
    itself (until :data:`ALONE_FIRST_WAIT_S`). The sort is stable otherwise.
    """
    alone = {item.path for item in items if item.get_closest_marker("alone")}
    items.sort(key=lambda item: (item.path not in alone, _file_rank(item),
                                 not item.get_closest_marker("alone")))  # fmt: skip


def pytest_collection_finish(session):
    """Note the last ``alone`` test this session runs (``None`` when there is none).

    Under xdist, also leave ``collected-<worker>`` in the shared folder: the ``alone`` tests
    start once every worker has collected (imports of JAX and the rest load the CPUs).
    """
    alone = [item.nodeid for item in session.items if item.get_closest_marker("alone")]
    session.config.stash[_LAST_ALONE] = alone[-1] if alone else None
    if worker := os.environ.get("PYTEST_XDIST_WORKER"):
        (_shared_folder(session.config) / f"collected-{worker}").touch()


def _shared_folder(config: pytest.Config) -> Path:
    """The run's temporary folder that every xdist worker sees (each gets a subfolder of it)."""
    return Path(config.option.basetemp).parent


_LAST_ALONE = pytest.StashKey[str | None]()
_GAVE_UP = pytest.StashKey[bool]()
# How long any other test waits for the ``alone`` tests before it starts anyway (seconds).
ALONE_FIRST_WAIT_S = 600.0


@contextlib.contextmanager
def _flock(path: Path, mode: int):
    with path.open("a") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _wait_until(ready, timeout_s: float, item: pytest.Item, what: str) -> None:
    """Poll ``ready()`` until it is true, or warn after ``timeout_s`` seconds and go on."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            item.warn(pytest.PytestWarning(f"{what} after {timeout_s} s: going on"))
            return
        time.sleep(0.2)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under xdist, ``alone`` tests run first, while no other test runs.

    They start once every worker has collected; the other tests start once ``alone.done``
    exists in the run's shared temporary folder (the worker that runs the last ``alone`` test
    writes it). Should an ``alone`` test still come later, a readers-writer lock holds it apart:
    every test holds ``run.lock`` shared (its fixtures' setup and teardown included), an
    ``alone`` test holds it exclusive, and the ``gate.lock`` turnstile keeps new tests from
    starving a waiting ``alone`` one.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return (yield)
    shared = _shared_folder(item.config)
    gate, run, done = shared / "gate.lock", shared / "run.lock", shared / "alone.done"
    last_alone = item.config.stash[_LAST_ALONE]
    if item.get_closest_marker("alone"):
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))

        def all_collected() -> bool:
            return len(list(shared.glob("collected-*"))) >= workers

        _wait_until(all_collected, ALONE_FIRST_WAIT_S, item, "not every worker has collected")
        try:
            with _flock(gate, fcntl.LOCK_EX), _flock(run, fcntl.LOCK_EX):
                return (yield)
        finally:
            if item.nodeid == last_alone:
                done.touch()
    alone_elsewhere = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1
    if last_alone is not None and alone_elsewhere and not item.config.stash.get(_GAVE_UP, False):
        _wait_until(done.exists, ALONE_FIRST_WAIT_S, item, "the alone tests are still running")
        # a worker waits at most once: should the wait time out, its next tests do not wait
        item.config.stash[_GAVE_UP] = not done.exists()
    with _flock(gate, fcntl.LOCK_EX):
        pass
    with _flock(run, fcntl.LOCK_SH):
        return (yield)
