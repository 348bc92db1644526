"""``jaxbench`` end to end, each in a fresh process: bad input, exit codes, cache, a killed run."""

import os
import signal
import subprocess
import sys
import time

import pytest

from jaxbench.analysis import load_results
from jaxbench.store import read_file
from jaxbench.store.scan import store_files
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.slow
TINY = ["-w", "train_step", "-s", "tiny", "-d", "float32", "--budget", "0", "--min-samples", "5"]


def test_list_shows_workloads_and_sizes():
    out = run_cli("list")
    assert out.returncode == 0, out.stderr
    for word in ("train_step", "forward", "linearize_apply", "tiny", "xl"):
        assert word in out.stdout
    assert "dynamic_update_slice (alias dus), scan_stack (alias scan)" in out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-w", "nope"], "unknown workload 'nope'"),
        (["-s", "huge"], "--size huge: unknown size 'huge'"),
        (["-b", "quantum"], "unknown backend 'quantum'"),
        (["-w", "forward", "-k", "0"], "--k 0: k (number of tangents) must be"),
        (["-w", "loop", "--param", "trip=0"], "--param trip=0: trip must be an integer"),
        (
            ["-w", "train_step", "-s", "tiny", "--param", "mesh=bogus"],
            "--param mesh=bogus: mesh 'bogus': expected none or axis:size pairs",
        ),
        (["--min-samples", "0"], "--min-samples must be >= 1"),
        (["--budget", "inf"], "--budget must be a finite number"),
        (["--compilation-cache", ""], "--compilation-cache '': expected off, fresh or a folder"),
        (
            ["--compilation-cache", "/proc/xla-cache"],
            "--compilation-cache '/proc/xla-cache': the folder cannot",
        ),
        (
            ["--compilation-cache", "Off"],
            "--compilation-cache 'Off': expected off, fresh or a folder; did you mean off?",
        ),
        (
            ["--compilation-cache", " none "],
            "--compilation-cache ' none ': expected off, fresh or a folder; did you mean off?",
        ),
        (
            ["--compilation-cache", "0"],
            "--compilation-cache '0': expected off, fresh or a folder; did you mean off?",
        ),
        (
            ["--compilation-cache", "no/such/xla-cache"],
            "--compilation-cache 'no/such/xla-cache': no folder 'no/such' to make it in",
        ),
        (["--cache-min-compile-time", "-1"], "--cache-min-compile-time -1: expected seconds >= 0"),
        (["-o", ""], "--out must be a path"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(args, message, tmp_path):
    out = run_cli("run", "-o", str(tmp_path), *args, cwd=tmp_path)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert not list(tmp_path.glob("*.jsonl"))
    assert not [p for p in tmp_path.iterdir() if p.is_dir()], "made a folder"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", ""], "Invalid value for 'paths': '': expected a file or folder"),
        (["report", "", "-o", "r"], "Invalid value for 'paths': '': expected a file or folder"),
        (["steps", ""], "Invalid value for 'paths': '': expected a file or folder"),
        (["status", ""], "Invalid value for 'sweep_dir': '': expected a file or folder"),
        (["compare", "results/cpu", ""], "'candidate': '': expected a results path or a JAX"),
        (["compare", " ", "results/cpu"], "'baseline': ' ': expected a results path or a JAX"),
        (["explain", "results/cpu", ""], "'candidate': '': expected a results path or a JAX"),
        (["review", "", "current"], "'baseline': '': expected a results path or a JAX"),
        (["review", "0.11.2", "current", "--out", ""], "--out must be a path, got ''"),
    ],
)
def test_an_empty_path_is_refused_not_read_as_this_folder(args, message, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from jaxbench.cli import app

    monkeypatch.chdir(tmp_path)  # were '' read as this folder, nothing here to read or write
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_unwritable_results_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = run_cli("run", "-o", str(blocker / "sub"), *TINY)
    assert out.returncode == 2
    assert "not writable" in out.stderr
    out = run_cli("run", "-o", str(blocker), *TINY)
    assert out.returncode == 2
    assert f"--out {str(blocker)!r} is a file, not a folder" in out.stderr


def test_show_names_bad_files_and_says_when_empty(tmp_path):
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(bytes(range(128, 228)))
    out = run_cli("show", str(binary))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"skipped: {binary}: line 1: not UTF-8 text: " in out.stderr
    assert "; nothing loaded\n" in out.stderr and f"error: no records in {binary}" in out.stderr
    out = run_cli("show", "--strict", str(binary))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"error: {binary}:1: not UTF-8 text: " in out.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    out = run_cli("show", str(empty))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"skipped: {empty}: holds no record (it holds nothing)" in out.stderr
    assert f"error: no records in {empty}" in out.stderr


def test_run_writes_records_and_prints_the_table(tmp_path):
    out = run_cli("run", "-o", str(tmp_path), *TINY, "-d", "bfloat16")
    assert out.returncode == 0, out.stderr
    assert "p50" in out.stdout and "results:" in out.stdout
    assert "[2/2] train_step" in out.stdout  # one progress line per case when not a terminal
    frame = load_results(tmp_path)[0]
    assert sorted(frame["param.dtype"]) == ["bfloat16", "float32"]
    assert set(frame["status"]) == {"ok"}


def test_debug_modes_are_refused_or_warned_recorded_and_kept_apart(tmp_path):
    from jaxbench.analysis.conditions import add_conditions

    refused = run_cli("run", "-o", str(tmp_path / "x"), *TINY, env={"JAX_DISABLE_JIT": "1"})
    assert refused.returncode == 2, refused.stderr
    assert "jax_disable_jit is on" in refused.stderr and "--allow-debug" in refused.stderr
    assert not (tmp_path / "x").exists() or not list((tmp_path / "x").glob("*.jsonl"))
    runs = {"clean": ({}, []), "nans": ({"JAX_DEBUG_NANS": "1"}, []),
            "nojit": ({"JAX_DISABLE_JIT": "1"}, ["--allow-debug"])}  # fmt: skip
    for name, (env, extra) in runs.items():
        out = run_cli("run", "-o", str(tmp_path / name), *TINY, *extra, env=env)
        assert out.returncode == 0, out.stderr
        assert ("warning:" in out.stderr) == (name != "clean"), out.stderr
    frame = add_conditions(load_results([tmp_path / n for n in runs])[0])
    flags = {n: frame[frame["file"].str.contains(f"/{n}/")] for n in runs}
    assert "jax_debug_nans" not in flags["clean"]["env"].iloc[0].jax_flags
    assert flags["nans"]["env"].iloc[0].jax_flags["jax_debug_nans"] is True
    assert flags["nojit"]["env"].iloc[0].jax_flags["jax_disable_jit"] is True
    assert len({f["condition"].iloc[0] for f in flags.values()}) == 3


def test_absent_backend_is_a_skip_not_a_crash_and_a_run_that_measured_nothing_exits_1(tmp_path):
    out = run_cli("run", "-o", str(tmp_path), *TINY, "-b", "tpu")
    assert out.returncode == 1, out.stderr
    assert (
        "error: nothing was measured: none of the 1 case(s) is ok (1 skipped); the first: "
        in out.stderr
    )
    [rec] = read_file(store_files([tmp_path])[0][0], strict=True).models("record")
    assert rec.status == "skipped" and "not present" in rec.error
    assert rec.env.requested_backend == "tpu"


def _cache_entries(folder):
    return [p for p in folder.rglob("*") if p.is_file()]


def test_persistent_cache_thresholds_and_hits(tmp_path):
    cache = tmp_path / "cache"
    # A threshold no compile reaches: nothing is written, whatever the machine's load.
    out = run_cli(
        "run",
        "-o",
        str(tmp_path / "r0"),
        *TINY,
        "--compilation-cache",
        str(cache),
        "--cache-min-compile-time",
        "3600",
    )
    assert out.returncode == 0, out.stderr
    assert _cache_entries(cache) == []
    assert (
        load_results(tmp_path / "r0")[0].iloc[0]["compilation_cache"]["min_compile_time_secs"]
        == 3600
    )
    # Threshold lowered: the first process writes entries, the second one hits them.
    args = [*TINY, "--compilation-cache", str(cache), "--cache-min-compile-time", "0"]
    assert run_cli("run", "-o", str(tmp_path / "r1"), *args).returncode == 0
    assert _cache_entries(cache)
    assert run_cli("run", "-o", str(tmp_path / "r2"), *args).returncode == 0
    cold = load_results(tmp_path / "r1")[0].iloc[0]["compilation_cache"]
    warm = load_results(tmp_path / "r2")[0].iloc[0]["compilation_cache"]
    assert cold["cache_hits"] == 0 and cold["cache_misses"] >= 1
    assert warm["cache_hits"] >= 1
    assert warm["dir"] == str(cache.resolve())


def test_killed_run_leaves_every_finished_case_readable(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "jaxbench",
        "run",
        "-o",
        str(tmp_path),
        "-w",
        "forward",
        "-s",
        "tiny",
        "-k",
        "1",
        "-k",
        "2",
        "-k",
        "3",
        "-k",
        "4",
        "--budget",
        "0.3",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            files = [f for f, _ in store_files([tmp_path])]
            if files and len(files[0].read_text().splitlines()) >= 3:
                break
            time.sleep(0.05)
        else:
            pytest.fail("no records appeared")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    records = read_file(files[0], strict=True).models("record")
    assert 3 <= len(records) < 20
    assert all(r.status in ("ok", "skipped") for r in records)


def test_gpu_check_script_runs_end_to_end_on_the_cpu(tmp_path):
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "BACKEND": "cpu",
        "OUT": str(tmp_path),
        "TRAIN_SIZES": "tiny",
        "FORWARD_SIZES": "tiny",
        "LM_SIZES": "tiny",
        "KS": "2",
        "TRIPS": "8 16",
        "SCATTER_N": "64",
        "COLLECTIVE_BYTES": "1024",
        "MESH_SIZE": "tiny",
        "DTYPES": "bfloat16",
        "BUDGET": "0",
        "MIN_SAMPLES": "3",
    }
    out = subprocess.run(
        ["bash", "scripts/gpu-check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    frame = load_results(tmp_path)[0]
    assert set(frame["benchmark"]) == {
        "train_step",
        "forward/linearize",
        "forward/vmap_jvp",
        "forward/linearize_apply",
        "forward/jvp_loop",
        "forward/jacfwd",
        "transformer/train_step",
        "loop/at_set",
        "scatter/embedding_grad",
        "compile/nested",
        *(f"collectives/{op}" for op in ("all_reduce", "all_gather", "reduce_scatter",
                                         "all_to_all", "permute")),
    }  # fmt: skip
    assert set(frame["status"]) == {"ok"}
    assert sorted(frame.loc[frame["benchmark"] == "loop/at_set", "param.trip"].unique()) == [8, 16]
    assert sorted(frame.loc[frame["benchmark"] == "train_step", "param.mesh"].unique()) == [
        "data:1", "none"]  # fmt: skip
    for bench in ("train_step", "transformer/train_step"):  # its last lines: the MFU of each
        assert f"{bench} size=tiny bfloat16 on cpu: p50" in out.stdout
    assert out.stdout.count("MFU n/a (no listed peak) (XLA's FLOP)") == 2
    assert "traced on cpu: " in out.stdout and "profiler cost x" in out.stdout
    assert list((tmp_path / "traced" / "traces").glob("*.xplane.pb.gz"))


def test_every_selecting_command_takes_the_same_selection_options_from_one_declaration():
    """run, submit, compare, calibrate, explain, review and bisect: one set of options."""
    import typer

    from jaxbench.cli import app
    from jaxbench.cli.selection import ALIASES

    group = typer.main.get_command(app)
    wanted = {"--workload", "--param", *(f"--{n}" for n in ALIASES)}
    selecting = {}
    for name, command in group.commands.items():
        options = {o for p in command.params for o in p.opts}
        if options & wanted and name != "drift":  # drift: one user workload's sets, not cases
            selecting[name] = options & (wanted | {"--full"})
    assert set(selecting) == {"run", "submit", "compare", "calibrate", "explain", "review",
                              "bisect"}  # fmt: skip
    assert all(opts >= wanted for opts in selecting.values()), selecting
    # Declared once: no command module names a selection option's annotation itself.
    for path in (ROOT / "jaxbench" / "cli").glob("*.py"):
        if path.stem not in ("options", "selection", "drift"):
            text = path.read_text()
            assert not any(f"{a}:" in text or f"{a} =" in text for a in
                           ("Sizes", "Dtypes", "Ks", "Strategies", "Optimizers", "Wrts",
                            "Params")), path  # fmt: skip


def test_version_environment_and_rule_options_are_declared_once():
    """compare, explain, review and bisect build venvs from one group of options; the commands
    that judge share one declaration of --threshold and --alpha."""
    import typer

    from jaxbench.cli import app

    group = typer.main.get_command(app)
    venv_opts = {"--env-root", "--jax-extra", "--extra-index-url", "--with", "--requirements"}
    building = {name: {o for p in command.params for o in p.opts} & venv_opts
                for name, command in group.commands.items()}  # fmt: skip
    building = {name: opts for name, opts in building.items() if "--env-root" in opts}
    assert set(building) == {"compare", "explain", "review", "bisect"}
    assert all(opts == venv_opts for opts in building.values()), building
    helps = {}
    for command in group.commands.values():
        for p in command.params:
            if p.name in ("env_root", "jax_extra", "threshold", "alpha"):
                helps.setdefault(p.name, set()).add(p.help)
    assert all(len(texts) == 1 for texts in helps.values()), helps
    for path in (ROOT / "jaxbench" / "cli").glob("*.py"):
        if path.stem != "options":
            assert "EnvRoot" not in path.read_text(), path


def test_what_the_commands_write_into_results_by_default_is_kept_out_of_git():
    """run, compare --interleave, calibrate, bisect and drift write into results/ by default;
    the committed runs live in results/<topic>/ folders."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    written = [
        "results/20261205T000000Z-x.jsonl", "results/programs/ab.json.gz",
        "results/traces/ab.xplane.pb.gz", "results/interleave-x.jsonl",
        "results/calibration-x.json", "results/bisect-x.md", "results/drift-x.jsonl",
    ]  # fmt: skip
    done = subprocess.run(["git", "check-ignore", *written], cwd=ROOT, capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.stdout.split() == written
    kept = subprocess.run(["git", "check-ignore", "results/versions/0.11.2/run.jsonl"], cwd=ROOT,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert kept.returncode == 1  # not ignored


def test_command_help_has_no_rest_markup():
    """`--help` renders a command's docstring and its options' help as Markdown: a reST double
    backtick would show as two backticks around the name, and outside backticks `<id>` is read
    as an HTML tag and dropped, `*` as emphasis. A flag shows no `<bool>`."""
    import re

    import typer

    from jaxbench.cli import app

    group = typer.main.get_command(app)
    texts = {name: [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
             for name, command in group.commands.items()}  # fmt: skip
    assert {"run", "show", "explain"} <= set(texts)
    marked = {name for name, helps in texts.items() if any("``" in h for h in helps)}
    assert marked == set()
    plain = {name: re.sub(r"`[^`]*`", "", " ".join(helps)) for name, helps in texts.items()}
    outside = {
        name: found for name, text in plain.items() if (found := re.findall(r"<[^>]*>|\*", text))
    }
    assert outside == {}
    done = run_cli("notebook", "--help")
    assert "analysis/<name>.py" in done.stdout and "analysis/<name>.ipynb" in done.stdout
    typed_flags = {(name, p.name) for name, command in group.commands.items()
                   for p in command.params if getattr(p, "is_flag", False)
                   and p.name != "help" and p.metavar != ""}  # fmt: skip
    assert typed_flags == set()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["nocmd"], "jaxbench: No such command 'nocmd' (see python -m jaxbench --help)"),
        (["show", "--nope"], "jaxbench show: No such option: --nope (see python -m jaxbench"),
        (["run", "--size"], "jaxbench run: Option '--size' requires an argument (see"),
        (["compare", "x"], "jaxbench compare: Missing argument 'candidate' (see"),
        (["compare", "--rounds", "abc", "a", "b"], "Invalid value for '--rounds'"),
        (["compare", "a", "b", "--threshold", "x"], "a valid number, unable to parse string as a "
         "number (got 'x')"),
        (["show", "--limit", "1.5", "."], "Invalid value for '--limit': Input should be a valid "
         "integer, unable to parse string as an integer (got '1.5')"),
        *[([*command, "--seed", "-1"], "Invalid value for '--seed': Input should be greater than "
           "or equal to 0 (got '-1')")
          for command in (["compare", "--interleave", "current", "current"], ["calibrate"])],
    ],
)  # fmt: skip
def test_usage_error_is_one_line(args, line):
    """A usage error of typer (unknown command or option, missing or unparsable value) is one
    line on stderr naming the command, exit 2: not typer's usage lines and boxed panel."""
    done = run_cli(*args)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: python -m jaxbench")
    assert line in done.stderr and "╭" not in done.stderr, done.stderr


@pytest.mark.parametrize("command", [
    ["compare", "--interleave", "current", "current"], ["explain", "current", "current"],
    ["review", "0.11.2", "0.12.0.1"], ["bisect", "0.11.2", "0.12.0.1"]])  # fmt: skip
def test_an_env_root_that_is_a_file_is_one_line_before_anything_runs(command, tmp_path):
    a_file = tmp_path / "afile"
    a_file.write_text("")
    done = run_cli(*command, "-w", "train_step", "-s", "tiny", "--env-root", str(a_file))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (f"error: --env-root {a_file}: a file, expected a folder for "
                                   "the JAX-version venvs")  # fmt: skip


@pytest.mark.parametrize("url", ["pypi.example.org/simple", "ftp://example.org/simple",
                                 "./no-such-index"])  # fmt: skip
def test_an_extra_index_url_that_pip_cannot_read_is_one_line_before_anything_runs(url, tmp_path):
    from jaxbench.cluster import pyenvs

    done = run_cli("review", "0.11.2", "0.12.0.1", "-w", "loop", "--extra-index-url", url,
                   "--env-root", str(tmp_path / "envs"), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (
        f"error: --extra-index-url {url!r}: expected an http(s):// or file:// URL, or a local "
        "folder laid out as a package index"
    )
    assert not (tmp_path / "envs").exists()
    (tmp_path / "index").mkdir()
    for good in ("https://example.org/simple/", "file:///srv/wheels", str(tmp_path / "index")):
        pyenvs.check_index_url(good)


@pytest.mark.parametrize("sides", [("/no/such/a", "/no/such/b"), ("run.jsonl", "0.11.2")])
def test_compare_of_a_path_that_does_not_exist_says_so_in_one_line(sides, tmp_path):
    done = run_cli("compare", *sides, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == f"error: {sides[0]!r}: no such file or folder (nor a JAX version)"


def test_an_own_option_is_an_alias_of_param():
    """``--size tiny -k 4`` and ``--param size=tiny --param k=4`` select the same cases."""
    from jaxbench.cli.selection import Selection

    by_alias = Selection(workload=["forward"], size=["tiny"], k=[4]).cases()
    by_param = Selection(workload=["forward"], param=["size=tiny", "k=4"]).cases()
    assert by_alias == by_param and {c.params["k"] for c in by_param} == {4}
    argv = Selection(workload=["forward"], size=["tiny"], k=[4], full=True).argv()
    assert argv == ["--workload", "forward", "--size", "tiny", "--k", "4", "--full"]


def test_pair_progress_bounds_the_time_left_by_the_cap(monkeypatch):
    import time

    from jaxbench.cli.lines import PairProgress

    clock = iter([100.0, 130.0, 1000.0])
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    progress = PairProgress(max_pairs=30, prefix="confirm: ")
    # 3 pairs in 30 s: 10 s a pair, 27 more allowed by the cap: at most 270 s
    assert progress.line(3, "f.jsonl") == (
        "confirm: pair 3 done (up to 30; 10.0 s a pair, at most about 4 min left); saved f.jsonl"
    )
    assert progress.line(30, "f.jsonl").endswith("the last the cap allows); saved f.jsonl")


def test_a_backend_jax_platforms_cannot_start_is_named_by_the_variable(tmp_path):
    """JAX's error names the backend it tried (ROCm for ``gpu`` on a CPU machine), not the
    variable the user set: the line says ``JAX_PLATFORMS`` is set. (A name no machine has, so
    the test means the same on a GPU machine.)"""
    done = run_cli("run", "-w", "loop", "--param", "trip=64", "--min-samples", "3", "--budget",
                   "0.05", "-o", str(tmp_path), env={"JAX_PLATFORMS": "nosuch"})  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith("error: cannot measure: ")
    assert done.stderr.rstrip().endswith("(JAX_PLATFORMS=nosuch is set; unset it or fix it)")


def test_version_names_jaxbench_jax_and_jaxlib_and_runs_no_command():
    from importlib.metadata import version

    done = run_cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"jaxbench {version('jaxbench')} (jax {version('jax')}, jaxlib "
                           f"{version('jaxlib')})\n")  # fmt: skip
