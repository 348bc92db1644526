import os
import subprocess
import sys
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
