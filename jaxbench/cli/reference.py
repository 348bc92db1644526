"""The command reference of ``docs/commands.md``, generated from the commands themselves.

An mkdocs hook (``hooks:`` in ``mkdocs.yml``): where the page holds :data:`MARKER`, the hook puts
the Markdown that typer's own ``typer jaxbench.cli.app utils docs`` writes for every command, its
arguments and its options, so the reference cannot fall behind the code. Nothing else imports it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

#: The line of ``docs/commands.md`` the reference replaces (an HTML comment: invisible elsewhere).
MARKER = "<!-- jaxbench commands -->"
ROOT = Path(__file__).resolve().parents[2]


def markdown() -> str:
    """Markdown of every ``jaxbench`` command, one ``##`` section each (the app's under ``#``).

    Written by typer's ``utils docs`` in a subprocess of this Python, with this checkout first on
    ``PYTHONPATH``; each heading is moved one level down, to sit under the page's own title.

    Raises:
        RuntimeError: typer could not write the reference (its stderr is in the message).
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "typer", "jaxbench.cli.app", "utils", "docs", "--name", "jaxbench"],
        capture_output=True, text=True, env=env, cwd=ROOT, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"typer utils docs failed: {done.stderr.strip()}")
    return "\n".join("#" + line if line.startswith("#") else line
                     for line in done.stdout.splitlines())  # fmt: skip


def on_page_markdown(markdown_text: str, **_: Any) -> str:
    """The mkdocs hook: a page's Markdown with :data:`MARKER` replaced by :func:`markdown`."""
    return markdown_text.replace(MARKER, markdown()) if MARKER in markdown_text else markdown_text
