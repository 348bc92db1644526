"""Imports flow one way through the package (docs/architecture.md); a test fails on any other."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "jaxbench"
#: Each module of the package belongs to one layer; a module may import its own layer and lower
#: ones only. The flow: store and inference (neutral) -> measure -> workloads -> cases ->
#: runner and drift -> (cluster | interleave | calibrate) -> analysis -> the command line (and
#: the upgrade review, which drives them all).
LAYERS: dict[str, int] = {
    "store": 0,
    "inference": 0,
    "tolerance": 0,
    "backends": 0,
    "folders": 0,
    "live_defaults": 0,
    "units": 0,
    "measure": 1,
    "distributed": 1,
    "env": 2,
    "workloads": 2,
    "cases": 3,
    "prepared": 3,
    "runner": 4,
    "drift": 4,
    "explain": 4,
    "cluster": 5,
    "interleave": 5,
    "bisect": 5,
    "calibrate": 5,
    "supervised": 5,
    "analysis": 6,
    "tables": 7,
    "cli": 7,
    "upgrade": 7,
    "__main__": 7,
    "__init__": 7,
}


def unit(module: str) -> str:
    """``jaxbench.analysis.frames`` -> ``analysis``: the package or top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path) -> set[str]:
    """Every ``jaxbench`` module ``path`` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("jaxbench")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "jaxbench":  # from jaxbench import env
                found |= {f"jaxbench.{a.name}" for a in node.names}
            elif node.module.startswith("jaxbench."):
                found.add(node.module)
    return found


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out.append((dotted.removesuffix(".__init__") if path.name == "__init__.py" else dotted,
                    path))  # fmt: skip
    return out


def against_the_flow() -> list[str]:
    wrong = []
    for module, path in modules():
        here = unit(module) if module != "jaxbench" else "__init__"
        for target in imports(path):
            there = unit(target)
            if there == "__version__" or there == here:
                continue
            if LAYERS[there] > LAYERS[here]:
                wrong.append(f"{module} imports {target} ({here} {LAYERS[here]} < {there} "
                             f"{LAYERS[there]})")  # fmt: skip
    return wrong


def test_every_module_has_a_layer():
    missing = {unit(m) for m, _ in modules() if m != "jaxbench"} - set(LAYERS)
    assert not missing, f"add to LAYERS (and docs/architecture.md): {sorted(missing)}"


def test_imports_flow_one_way():
    assert against_the_flow() == []


@pytest.mark.parametrize(
    ("module", "target"),
    [
        ("analysis/frames.py", "jaxbench.cli"),  # analysis importing the command line
        ("analysis/frames.py", "jaxbench.tables"),
        ("interleave/session.py", "jaxbench.analysis.frames"),  # interleave importing analysis
        ("drift/check.py", "jaxbench.analysis.versions"),  # drift importing analysis
        ("measure/harness.py", "jaxbench.cluster.sweep"),  # measure importing cluster
        ("store/loader.py", "jaxbench.measure"),  # the store importing anything of jaxbench
    ],
)
def test_an_import_against_the_flow_is_caught(module, target, tmp_path, monkeypatch):
    path = PACKAGE / module
    text = path.read_text(encoding="utf-8")
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: (
        text + f"\n\ndef _probe():\n    import {target}\n" if self == path
        else Path.read_bytes(self).decode()))  # fmt: skip
    wrong = against_the_flow()
    assert any(w.startswith(f"jaxbench.{module[:-3].replace('/', '.')} imports {target}")
               for w in wrong), wrong  # fmt: skip


#: The modules of ``jaxbench/cli/`` that commands share; every other one is a command.
CLI_SHARED = {"__init__", "app", "options", "lines", "selection"}


def commands_importing_commands() -> list[str]:
    """``cli/X.py imports jaxbench.cli.Y`` for each command module importing another one."""
    wrong = []
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        if path.stem in CLI_SHARED:
            continue
        for target in imports(path):
            parts = target.split(".")
            if parts[:2] == ["jaxbench", "cli"] and len(parts) > 2 and parts[2] not in CLI_SHARED:
                wrong.append(f"cli/{path.name} imports {target}")
    return wrong


def test_commands_do_not_import_each_other():
    """A command module shares only through options and lines (one way through the code)."""
    assert commands_importing_commands() == []


def test_a_command_importing_a_command_is_caught(monkeypatch):
    path = PACKAGE / "cli" / "explain.py"
    text = path.read_text(encoding="utf-8")
    monkeypatch.setattr(Path, "read_text", lambda self, encoding=None: (
        text + "\n\ndef _probe():\n    from jaxbench.cli.compare import register\n" if self == path
        else Path.read_bytes(self).decode()))  # fmt: skip
    assert commands_importing_commands() == ["cli/explain.py imports jaxbench.cli.compare"]


def test_the_command_line_starts_without_jax_scipy_or_pandas():
    """``jaxbench --help``, bad input and ``show`` must not wait for JAX, scipy or pandas."""
    import subprocess
    import sys

    heavy = "('jax', 'scipy', 'pandas')"
    probe = f"import sys, jaxbench.cli; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_comparison_tables_do_not_import_matplotlib():
    """``compare`` and ``show`` print tables: they must not wait for the plotting libraries,
    which only the report's figures need."""
    import subprocess
    import sys

    probe = ("import sys, jaxbench.tables, jaxbench.analysis.report_tables; "
             "print(sorted(m for m in ('matplotlib', 'seaborn') if m in sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.slow
def test_the_alone_tests_come_first_in_the_order_the_suite_runs():
    """Every other test waits for the last ``alone`` one (tests/conftest.py): a test that runs
    before it on the same worker, in its file, would wait for a test queued behind itself."""

    # a session of its own, not taken for one of this run's xdist workers
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}

    def collected(*args: str) -> list[str]:
        done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0",
                               "-p", "no:cacheprovider", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=300, env=env)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return [line for line in done.stdout.splitlines() if "::" in line]

    order, alone = collected(), set(collected("-m", "alone"))
    assert alone, "no alone test collected"
    files = list(dict.fromkeys(test.split("::")[0] for test in order))
    alone_files = {test.split("::")[0] for test in alone}
    assert set(files[: len(alone_files)]) == alone_files  # their files first
    for file in alone_files:  # and in each, its alone tests before its others
        tests = [test for test in order if test.startswith(f"{file}::")]
        flags = [test in alone for test in tests]
        assert flags == sorted(flags, reverse=True), tests
