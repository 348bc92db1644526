"""The documentation site builds with warnings as errors, its command reference names every
command and option, and the README keeps its two set-up commands and its links."""

import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from jaxbench.cli import app
from tests.conftest import ROOT

README = ROOT / "README.md"
#: The README's two set-up commands: the main job with its defaults, and the tests (.ci/run).
SETUP_COMMANDS = (
    "bash scripts/setup.sh && .venv/bin/jaxbench run",
    "bash scripts/setup.sh test && .venv/bin/python -m pytest",
)

# mkdocs comes with the `docs` extra (in `test`); in CI its absence is a failure, not a skip.
if importlib.util.find_spec("mkdocs") is None:
    if os.environ.get("CI"):
        pytest.fail("CI is set but mkdocs is not installed (the `docs` extra)", pytrace=False)
    pytestmark = pytest.mark.skip(reason="mkdocs is not installed (the `docs` extra)")


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site``, in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = build(ROOT / "mkdocs.yml", out)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_site_builds_with_warnings_as_errors(site):
    assert (site / "index.html").is_file()
    for page in ("usage", "measures", "commands", "comparing", "layout", "ci", "performance"):
        assert (site / page / "index.html").is_file(), page


def test_a_broken_link_fails_the_build(tmp_path):
    """strict is on: a link to a page that does not exist stops the build."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    hook = "jaxbench/cli/reference.py"
    config = (ROOT / "mkdocs.yml").read_text()
    assert hook in config
    (tmp_path / "mkdocs.yml").write_text(config.replace(hook, str(ROOT / hook)))
    page = tmp_path / "docs" / "usage.md"
    page.write_text(page.read_text() + "\nSee [the missing page](missing.md).\n")
    done = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "missing.md" in done.stdout + done.stderr


def command_sections(page: str) -> dict[str, str]:
    """``{command: the HTML of its section}`` of the command reference page."""
    heads = list(re.finditer(r'<h3 id="jaxbench-([a-z-]+)"', page))
    ends = [m.start() for m in heads[1:]] + [len(page)]
    return {m.group(1): page[m.start() : end] for m, end in zip(heads, ends, strict=True)}


def test_the_command_reference_has_every_command_and_option(site):
    group = typer.main.get_command(app)
    names = set(group.commands)  # what `jaxbench --help` lists
    assert {"run", "compare", "review", "show", "explain", "bisect"} <= names
    sections = command_sections((site / "commands" / "index.html").read_text())
    assert set(sections) == names
    for name, command in group.commands.items():
        text = html.unescape(re.sub(r"<[^>]+>", "", sections[name]))  # the text, tags removed
        assert f"jaxbench {name}" in text
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("-"):
                    assert opt in text, f"{name}: {opt}"
        if command.help:
            first = command.help.strip().splitlines()[0].replace("`", "")  # Markdown
            assert first.split(":")[0] in text, name


def test_the_readme_keeps_its_two_setup_commands():
    blocks = re.findall(r"```bash\n(.*?)\n```", README.read_text(), flags=re.DOTALL)
    assert list(SETUP_COMMANDS) == blocks[:2]
    # CI runs the README's test command as it is written there.
    assert SETUP_COMMANDS[1] in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_readme_links_resolve():
    """mkdocs checks links inside docs/; the README's relative links are checked here."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert "docs/index.md" in local and "CHANGELOG.md" in local
    missing = [link for link in local if not (ROOT / link).is_file()]
    assert missing == []
