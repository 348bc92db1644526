"""Change points over commits (asv's step detection on per-commit medians of processes).

Seeded simulations with a known truth: 14 commits, two processes a commit, each process's
latencies drawn around a per-process level with 3 % process-level noise (log-normal); a step of
+20 % at commit 8, or none.
"""

from __future__ import annotations

import subprocess

import numpy as np
from analysis_data import record, write

from jaxbench.analysis import load_results
from jaxbench.analysis.steps import change_points, commit_values
from tests.conftest import run_cli

COMMITS = [f"{i:02d}" * 20 for i in range(14)]  # 40-hex-like ids, oldest first


def _series(folder, step_at=None, size=0.20, seed=0, processes=2):
    rng = np.random.default_rng(seed)
    for i, commit in enumerate(COMMITS):
        level = 1e-3 * (1 + size if step_at is not None and i >= step_at else 1.0)
        for p in range(processes):
            proc = level * np.exp(rng.normal(0, 0.03))
            samples = list(proc * np.exp(rng.normal(0, 0.01, 15)))
            rec = record("0.12.0.1", samples, run_id=f"{commit[:6]}-{p}",
                         env={"git": {"commit": commit}})  # fmt: skip
            write(folder / f"{commit[:6]}-{p}.jsonl", [rec])
    return folder


def test_a_step_is_found_with_its_commit_range_and_size(tmp_path):
    frame = load_results(_series(tmp_path, step_at=8))[0]
    values = commit_values(frame)
    assert len(values) == len(COMMITS) and set(values["processes"]) == {2}
    (found,) = change_points(frame, COMMITS)
    assert (found.last_before, found.first_after) == (COMMITS[7], COMMITS[8])
    assert 1.15 < found.ratio < 1.25
    assert (found.commits_before, found.commits_after) == (8, 6)


def test_flat_noisy_series_report_no_change(tmp_path):
    reported = [
        bool(change_points(load_results(_series(tmp_path / str(seed), seed=seed))[0], COMMITS))
        for seed in range(20)
    ]
    assert sum(reported) == 0  # 20 flat series with 3 % process noise: no 5 % change


def test_the_steps_command_prints_the_range_and_names_bad_input(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@invalid"]
    ids = []
    for i in range(10):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", str(i)], check=True)
        ids.append(subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                                  check=True).stdout.strip())  # fmt: skip
    results = tmp_path / "results"
    for i, commit in enumerate(ids):
        for p in range(2):
            level = 1e-3 * (1.3 if i >= 6 else 1.0) * (1 + 0.01 * p)
            rec = record("0.12.0.1", [level] * 5, run_id=f"{i}-{p}",
                         env={"git": {"commit": commit}})  # fmt: skip
            write(results / f"{i}-{p}.jsonl", [rec])
    out = run_cli("steps", str(results), "--repo", str(repo))
    assert out.returncode == 0, out.stderr
    assert f"{ids[5][:8]}..{ids[6][:8]}" in out.stdout and "+30.0%" in out.stdout
    bad = run_cli("steps", str(results), "--repo", str(tmp_path))
    assert bad.returncode == 2 and f"--repo {tmp_path}: not a git repository" in bad.stderr
    outside = run_cli("steps", str(results), cwd=tmp_path)  # --repo defaults to "."
    assert outside.returncode == 2 and "--repo .: not a git repository" in outside.stderr
    typo = run_cli("steps", str(tmp_path / "nope"), cwd=tmp_path)  # the path first, not --repo
    assert typo.returncode == 2 and f"no such results file or folder: {tmp_path / 'nope'}" in (
        typo.stderr
    )
    neg = run_cli("steps", str(results), "--repo", str(repo), "--min-change", "-1")
    assert neg.returncode == 2 and "--min-change -1" in neg.stderr
    # no step: what was examined is said, and commits the history lacks are named
    flat = tmp_path / "flat"
    for i, commit in enumerate([*ids[:3], "ab" * 20]):
        write(flat / f"{i}.jsonl", [record("0.12.0.1", [1e-3] * 5, run_id=str(i),
                                           env={"git": {"commit": commit}})])  # fmt: skip
    none = " ".join(run_cli("steps", str(flat), "--repo", str(repo)).stdout.split())
    assert ("no change of 5% or more in any case: 1 series (a case under one condition) "
            "examined, the longest over 3 commit(s) of --repo's first-parent history; 1 recorded "
            f"commit(s) are not in that history, left out (e.g. {'ab' * 20})") in none  # fmt: skip
    one = run_cli("steps", str(flat / "0.jsonl"), "--repo", str(repo)).stdout
    assert "the longest over 1 commit(s)" in one and "a step needs at least 2 commits" in one
