"""The asv suite: discovery, no compile in timed samples, asv run/publish, the results reader."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jaxbench.analysis import load_results
from jaxbench.analysis.frames import samples_frame
from tests.conftest import ROOT, run_cli

ASV = [sys.executable, "-m", "asv"]
BENCH_DIR = ROOT / "benchmarks"


def _config(tmp_path: Path, **over) -> Path:
    """A copy of asv.conf.json with every output folder under ``tmp_path``."""
    text = (ROOT / "asv.conf.json").read_text()
    conf = json.loads("\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("//")))
    conf |= {
        "repo": str(ROOT),
        "benchmark_dir": str(BENCH_DIR),
        "env_dir": str(tmp_path / "env"),
        "results_dir": str(tmp_path / "results"),
        "html_dir": str(tmp_path / "html"),
    } | over
    path = tmp_path / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=2))
    return path


def _asv_env(home: Path) -> dict[str, str]:
    """The environment asv runs in: a fresh HOME; pip's real download cache.

    pip does not byte-compile what it installs into asv's environments (``PIP_COMPILE=0``,
    two thirds of an environment's build time); the benchmark processes write the bytecode of
    what they import, once (``PYTHONDONTWRITEBYTECODE`` dropped).
    """
    pip_cache = os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"HOME": str(home), "PIP_CACHE_DIR": pip_cache, "PIP_COMPILE": "0"}


def _asv(
    tmp_path: Path, *args: str, timeout: int = 600, env: dict | None = None, script: bool = False
):
    """Run asv with a fresh HOME (machine ``testbox``).

    ``script=True`` goes through ``scripts/asv-run`` (``--record-samples``, ``PYENV_VERSION`` for
    asv's virtualenvs), as the documented commands do.
    """
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    # A fresh HOME for asv's machine file; pip keeps the real download cache.
    full_env = _asv_env(home) | (env or {})
    full_env["ASV"] = str(Path(sys.executable).parent / "asv")
    if not (home / ".asv-machine.json").exists():
        subprocess.run(
            [*ASV, "machine", "--yes", "--machine", "testbox"],
            env=full_env,
            check=True,
            capture_output=True,
        )
    return subprocess.run(
        [str(ROOT / "scripts" / "asv-run"), *args] if script else [*ASV, *args],
        cwd=tmp_path,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _head() -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_suite_discovery_names_units_and_params():
    from asv_runner.discovery import disc_benchmarks

    sys.path.insert(0, str(ROOT))
    found = {b.name: b for b in disc_benchmarks(str(BENCH_DIR))}
    for name in (
        "bench_train_step.TrainStep.time_step",
        "bench_train_step.TrainStepMemory.peakmem_step",
        "bench_train_step.TrainStepCosts.track_compile_s",
        "bench_train_step.TrainStepCosts.track_lower_s",
        "bench_train_step.TrainStepCosts.track_flops_per_s",
        "bench_train_step.TrainStepCosts.track_mfu",
        "bench_train_step.TrainStepCosts.track_device_peak_bytes",
        "bench_forward.ForwardProducts.time_products",
        "bench_forward.ForwardCosts.track_held_bytes",
        "bench_loops.Loop.time_loop",
        "bench_loops.LoopWidth.time_loop",
        "bench_scatter.Scatter.time_op",
        "bench_compile.CompileCosts.track_compile_s",
    ):
        assert name in found, sorted(found)
    assert not [n for n in found if "_Costs" in n or ".common." in n]
    units = {n.rsplit(".", 1)[-1]: b.unit for n, b in found.items()}
    assert units["track_compile_s"] == "seconds"
    assert units["track_flops_per_s"] == "FLOP/s"
    assert units["track_mfu"] == "fraction"
    assert units["track_held_bytes"] == "bytes"
    assert found["bench_forward.ForwardProducts.time_products"].param_names[-1] == "backend"
    # the loop's width is fixed at 64 in Loop (its asv history keeps its names), swept apart
    assert found["bench_loops.Loop.time_loop"].param_names == ["trip", "body", "mode", "backend"]
    assert found["bench_loops.LoopWidth.time_loop"].param_names[0] == "width"


GATE_BENCH = '''
"""A benchmark whose bfloat16 case fails its correctness gate (forced), for the tests."""
import jaxbench.workloads.train_step as ts
from jaxbench.workloads import GateFailure

from benchmarks.bench_train_step import TrainStep

_gate = ts._gate


def _failing_gate(optimizer, step, state0, batch, dtype, *args, **kwargs):
    if dtype == "bfloat16":
        raise GateFailure("forced by the test")
    return _gate(optimizer, step, state0, batch, dtype, *args, **kwargs)


ts._gate = _failing_gate


class GateCheck(TrainStep):
    params = (["tiny"], ["float32", "bfloat16"], ["cpu"])
'''


@pytest.mark.slow
def test_asv_run_existing_env_saves_samples_and_a_failure_fails_alone(tmp_path):
    suite = tmp_path / "suite" / "benchmarks"
    shutil.copytree(BENCH_DIR, suite, ignore=shutil.ignore_patterns("__pycache__"))
    (suite / "bench_gate.py").write_text(GATE_BENCH)
    conf = _config(tmp_path, benchmark_dir=str(suite))
    head = _head()
    out = _asv(
        tmp_path,
        "run",
        "--config",
        str(conf),
        "-E",
        "existing:same",
        "--quick",
        "--record-samples",
        "--set-commit-hash",
        head,
        "--bench",
        r"TrainStepMemory|ForwardCosts\.track_(held_bytes|compile_s)|GateCheck",
        timeout=600,
    )
    log = out.stdout + out.stderr
    assert "GateCheck.time_step" in log
    assert "forced by the test" in log
    frame = load_results(tmp_path / "results")[0]
    status = {
        (r.benchmark.rsplit(".", 1)[-1], r.get("param.dtype")): r
        for _, r in frame.iterrows()
        if r.benchmark.startswith("bench_gate")
    }
    assert status[("time_step", "float32")]["status"] == "ok"
    assert status[("time_step", "bfloat16")]["status"] == "failed"
    # The others ran: held bytes on the CPU, n/a on the absent GPU.
    held = frame[frame.benchmark == "bench_forward.ForwardCosts.track_held_bytes"]
    by = {(r["param.strategy"], r["param.backend"]): r for _, r in held.iterrows()}
    assert by[("linearize", "cpu")]["metrics"].value > 0
    assert by[("vmap_jvp", "cpu")]["metrics"].value == 0
    assert by[("linearize", "gpu")]["status"] == "skipped"
    mem = frame[frame.benchmark.str.endswith("peakmem_step") & (frame["param.backend"] == "cpu")]
    assert (mem["host_peak_rss_bytes"] > 0).all()
    assert set(frame["commit"]) == {head}
    assert set(frame["machine"]) == {"testbox"}
    ok_time = frame[(frame.benchmark == "bench_gate.GateCheck.time_step") & (frame.status == "ok")]
    assert len(ok_time.iloc[0]["samples_s"]) >= 1
    assert not samples_frame(ok_time).empty


@pytest.mark.slow
def test_asv_frame_has_the_core_columns(tmp_path):
    out = run_cli(
        "run", "-o", str(tmp_path / "core"), "-w", "train_step", "-s", "tiny", "-d", "float32",
        "--budget", "0", "--min-samples", "3",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    core = load_results(tmp_path / "core")[0]
    asv = load_results(ROOT / "results" / "asv")[0]
    assert set(core.columns) - set(asv.columns) <= {"param.optimizer", "param.donate", "param.mesh"}
    for col in ("benchmark", "params", "jax", "machine", "commit", "samples_s", "status"):
        assert col in asv.columns
    assert asv["jax"].nunique() >= 2  # committed results cover at least two JAX versions
    timed = asv[(asv.status == "ok") & asv.benchmark.str.contains(r"\.time_")]
    assert not timed.empty and (timed["samples_s"].map(len) > 1).all()


def test_reader_rejects_a_bad_file(tmp_path):
    bad = tmp_path / "abc-env.json"
    bad.write_text('{"version": 1}')
    frame, (problem,) = load_results(bad)
    assert frame.empty and problem.path == str(bad)
    assert "not a jaxbench object" in problem.reason
    (tmp_path / "asv").mkdir()
    (tmp_path / "asv" / "abc-env.json").write_text(
        json.dumps({"version": 1, "commit_hash": "a", "env_name": "e", "result_columns": []})
    )
    _, (old,) = load_results(tmp_path / "asv")
    assert "asv results version 1 is not supported" in old.reason
    with pytest.raises(FileNotFoundError):
        load_results(tmp_path / "missing")[0]
    # A value a record cannot hold (a negative sample) is one line naming where, not pydantic's
    # page of errors with their URLs.
    (committed,) = list((ROOT / "results" / "asv" / "vm").glob("436fa1b9-*0.12.0.1.json"))
    data = json.loads(committed.read_text())
    name, row = next((n, r) for n, r in data["results"].items() if ".time_" in n)
    samples = row[data["result_columns"].index("samples")]
    samples[0][0] = -1.0
    (tmp_path / "neg").mkdir()
    (tmp_path / "neg" / committed.name).write_text(json.dumps(data))
    _, (negative,) = load_results(tmp_path / "neg")
    assert negative.reason.startswith(f"benchmark {name!r}: samples_s.0: "), negative.reason
    assert "\n" not in negative.reason and "pydantic" not in negative.reason


@pytest.mark.slow
def test_matrix_reports_an_uninstallable_version_and_runs_the_rest(tmp_path):
    conf = _config(tmp_path, matrix={"req": {"jax": ["0.12.0.1", "99.0.0"]}}, exclude=[])
    home = tmp_path / "home"
    home.mkdir()
    env = _asv_env(home) | {"ASV_CONFIG": str(conf)}
    env["ASV"] = str(Path(sys.executable).parent / "asv")
    out = subprocess.run(
        [str(ROOT / "scripts" / "asv-matrix"), "--quick", "--bench",
         r"ForwardCosts\.track_held_bytes", "HEAD^!"],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert out.returncode == 1
    assert "jax 99.0.0 FAILED" in out.stdout, out.stdout[-3000:]
    assert re.search(r"No matching distribution|Could not find", out.stdout), out.stdout[-3000:]
    frame = load_results(tmp_path / "results")[0]
    assert set(frame["jax"]) == {"0.12.0.1"}
    assert (frame[frame["param.backend"] == "cpu"]["status"] == "ok").all()


ONE_STEP = r"TrainStep\.time_step\('tiny', 'float32', 'cpu'\)"
"""``--bench`` regex: one parameter set of one benchmark (asv matches ``name(params)``)."""
SLOW_LINE = "        __import__('time').sleep(0.02)  # a deliberate regression (test_asv)\n"


def _clone_with_a_regression(tmp_path: Path) -> tuple[Path, str, str]:
    """A throwaway clone of HEAD plus two commits: a no-op comment, then a 20 ms slower step
    (far above the few milliseconds a tiny step takes on a busy 2-core machine).

    Returns the clone and the full hashes of the two new commits (HEAD~1, HEAD).
    """
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "checkout", "--quiet", "--detach", _head()], check=True)
    git = ["git", "-C", str(repo), "-c", "user.name=test", "-c", "user.email=test@invalid"]
    with (repo / "jaxbench" / "__init__.py").open("a") as f:
        f.write("# a no-op change (test_asv)\n")
    subprocess.run([*git, "commit", "--quiet", "-am", "no-op"], check=True)
    prepared = repo / "jaxbench" / "prepared.py"
    call = "        out = jax.block_until_ready(self.step.call(self.state))\n"
    text = prepared.read_text()
    assert text.count(call) == 1, "PreparedCase.call_once changed: update this test"
    prepared.write_text(text.replace(call, SLOW_LINE + call))
    subprocess.run([*git, "commit", "--quiet", "-am", "slower call_once"], check=True)
    revs = subprocess.run(
        [*git, "rev-parse", "HEAD~1", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.split()
    return repo, revs[0], revs[1]


@pytest.mark.slow
def test_run_two_commits_then_compare_and_continuous_catch_a_regression(tmp_path):
    from importlib.metadata import version

    status = ["git", "-C", str(ROOT), "status", "--porcelain"]
    status_before = subprocess.run(status, capture_output=True, text=True).stdout
    repo, base, slow = _clone_with_a_regression(tmp_path)
    # One matrix entry: the JAX already installed here (pip's cache serves it).
    jax_req = {"jax": [version("jax")], "jaxlib": [version("jaxlib")]}
    conf = _config(
        tmp_path,
        repo=str(repo),
        benchmark_dir=str(repo / "benchmarks"),
        matrix={"req": jax_req},
        exclude=[],
    )
    cfg = ("--config", str(conf))
    fast = ("-a", "rounds=1", "-a", "repeat=10", "--bench", ONE_STEP)  # 10 samples a commit

    # `asv run HEAD~2..HEAD`: the last two commits (git range), samples kept by scripts/asv-run.
    out = _asv(tmp_path, "run", *cfg, *fast, "HEAD~2..HEAD", script=True)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    files = sorted(p.name for p in (tmp_path / "results" / "testbox").glob("*-virtualenv-*.json"))
    assert [f[:8] for f in files] == sorted([base[:8], slow[:8]]), files
    frame = load_results(tmp_path / "results")[0]
    ok = frame[frame.status == "ok"]
    assert set(ok["commit"]) == {base, slow}
    assert set(ok["param.size"]) == {"tiny"} and set(ok["param.backend"]) == {"cpu"}
    assert (ok["samples_s"].map(len) == 10).all()  # --record-samples: every raw sample
    median = {r.commit: sorted(r.samples_s)[5] for r in ok.itertuples()}
    assert median[slow] - median[base] > 0.015  # the 20 ms sleep is measured

    # `asv compare` reads the saved results; it exits 0 even on a regression.
    out = _asv(tmp_path, "compare", *cfg, "HEAD~1", "HEAD", script=True)
    assert out.returncode == 0, out.stderr
    row = [ln for ln in out.stdout.splitlines() if "time_step('tiny', 'float32', 'cpu')" in ln]
    assert len(row) == 1 and row[0].lstrip("| ").startswith("+"), out.stdout  # "+": slower

    # `asv continuous` runs both commits again: exit 1 on a regression beyond the factor (how
    # asv applies its factor is asv's to test, so it is not run a second time with another).
    out = _asv(tmp_path, "continuous", *cfg, *fast, "HEAD~1", "HEAD", script=True)
    assert out.returncode == 1, (out.stdout + out.stderr)[-3000:]
    assert "PERFORMANCE DECREASED" in out.stdout
    assert "bench_train_step.TrainStep.time_step('tiny', 'float32', 'cpu')" in out.stdout

    # It needs built environments: an existing one cannot hold two commits.
    out = _asv(tmp_path, "continuous", *cfg, "-E", "existing:same", "HEAD~1", "HEAD", script=True)
    assert out.returncode != 0
    assert "No range spec may be specified" in out.stdout + out.stderr
    # Nothing was written into this repository.
    assert subprocess.run(status, capture_output=True, text=True).stdout == status_before


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_publish_html_opens_in_headless_chromium(tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    if not shutil.which("npm"):
        pytest.skip("npm is not installed: asv's page needs its CDN scripts vendored from npm")
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results" / "asv", results)
    conf = _config(tmp_path, results_dir=str(results))
    out = _asv(tmp_path, "publish", "--config", str(conf))
    assert out.returncode == 0, out.stderr
    html = tmp_path / "html"
    assert (html / "index.html").is_file()
    # Points, not empty thumbnails: asv plots a branch along its first parents, so the
    # committed results of a commit on main's first-parent line have graphs with values.
    hashes = json.loads((html / "index.json").read_text())["revision_to_hash"].values()
    rev_list = ["git", "-C", str(ROOT), "rev-list", "--first-parent", "HEAD"]
    first_parent = subprocess.run(
        rev_list, capture_output=True, text=True, check=True
    ).stdout.split()
    committed = {p.name[:8] for p in (ROOT / "results" / "asv").glob("*/*-virtualenv-*.json")}
    plotted = {h[:8] for h in hashes} & committed & {h[:8] for h in first_parent}
    assert plotted, (committed, list(hashes)[:5])
    points = [
        point
        for graph in (html / "graphs").rglob("*.json")
        for point in json.loads(graph.read_text())
        if isinstance(point, list) and len(point) == 2 and point[1] is not None
    ]
    assert len(points) > 50, len(points)
    # No internet here: serve asv's CDN scripts from local copies (npm registry).
    vend = subprocess.run(
        [str(ROOT / "scripts" / "asv-offline-html"), str(html)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert vend.returncode == 0, vend.stderr
    assert "code.jquery.com" not in (html / "index.html").read_text()
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=html,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)
        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=15000",
            "--window-size=1280,1600",
        ]
        url = f"http://127.0.0.1:{port}/index.html"
        shot = tmp_path / "index.png"
        subprocess.run(
            [chromium, *flags, f"--user-data-dir={tmp_path / 'p1'}", f"--screenshot={shot}", url],
            capture_output=True,
            timeout=120,
        )
        dom = subprocess.run(
            [chromium, *flags, f"--user-data-dir={tmp_path / 'p2'}", "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
    assert "failed to load" not in dom
    for name in ("TrainStep.time_step", "ForwardProducts.time_products", "track_held_bytes"):
        assert name in dom, name


def test_asv_run_script_always_records_samples():
    text = (ROOT / "scripts" / "asv-run").read_text()
    assert re.search(r'run\) exec "\$asv" run .*--record-samples', text)
    assert 'exec "$asv" continuous "${config[@]}" --record-samples' in text
    conf = (ROOT / "asv.conf.json").read_text()
    assert '"results_dir": "results/asv"' in conf
    ignored = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "-q", ".asv/html/index.html"]
    ).returncode
    assert ignored == 0
    for version in ("0.10.2", "0.11.2", "0.12.0.1"):
        assert f'"{version}"' in conf


@pytest.mark.slow
def test_a_documented_run_files_its_results_outside_git_and_jax_picks_one_environment(tmp_path):
    status = ["git", "-C", str(ROOT), "status", "--porcelain"]
    before = subprocess.run(status, capture_output=True, text=True).stdout
    out = _asv(tmp_path, "run", "-E", "existing:same", "--quick", "--set-commit-hash", _head(),
               "--bench", ONE_STEP, script=True)  # fmt: skip
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    saved = list((ROOT / ".asv" / "results" / "testbox").glob(f"{_head()[:8]}-existing-*.json"))
    assert saved, "the run saved no results under .asv/results"
    assert subprocess.run(status, capture_output=True, text=True).stdout == before
    conf = json.loads((ROOT / ".asv" / "asv.run.json").read_text())
    assert conf["results_dir"] == str(ROOT / ".asv" / "results")
    out = _asv(tmp_path, "show", "--jax", "0.12.0.1", script=True)  # writes the config, reads
    assert out.returncode == 0, out.stderr
    conf = json.loads((ROOT / ".asv" / "asv.run.json").read_text())
    assert conf["matrix"] == {"req": {"jax": ["0.12.0.1"], "jaxlib": ["0.12.0.1"]}}
    assert conf["exclude"] == []
    out = _asv(tmp_path, "show", "--jax=0.11.2", script=True)  # the --jax=V form too
    assert out.returncode == 0, out.stderr
    conf = json.loads((ROOT / ".asv" / "asv.run.json").read_text())
    assert conf["matrix"] == {"req": {"jax": ["0.11.2"], "jaxlib": ["0.11.2"]}}
