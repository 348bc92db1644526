"""How ``show``, ``compare`` and ``report`` scale with the number of records in the store.

For each size in ``--records``, this writes that many synthetic records into a temporary folder,
as ``jaxbench run`` writes them: valid :class:`jaxbench.store.Record` lines, one JSON Lines file
per process, ``--cases`` cases a process, two sides (``A/`` and ``B/``) that differ in their JAX
version (the candidate a few percent slower on every tenth case). The cases are
forward-mode ones (five strategies, two ``wrt``, K from 1 up). Then it times three commands,
each as a subprocess run from that folder:

- ``jaxbench show A B``;
- ``jaxbench compare A B`` (recorded, two result paths);
- ``jaxbench report A B -o report`` (the version-upgrade review, with figures).

For each it records the wall time (seconds, ``time.perf_counter``), the child's peak resident
set size (bytes, ``os.wait4``'s ``ru_maxrss``) and the exit status (``compare`` exits 1 when a
case is slower, which the synthetic candidate is); a command still running after ``--timeout``
seconds is killed and marked ``timed_out``. The store needs about 2.4 KiB of disk a record in the
temporary folder (``TMPDIR``), removed after each size. The results go to
``<out>/store-scale-<run id>.json`` (kind ``store-scale``, a kind the store's loader passes
over), with the machine (:func:`jaxbench.env.host`). Run it alone on a quiet machine::

    .venv/bin/python scripts/store_scale.py --records 5000,50000,500000

The environment of a record is taken once from this process (:func:`jaxbench.env.collect`, which
imports JAX), so records are as large as real ones.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jaxbench.store import Record, new_run_id, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ("0.4.30", "0.4.31")
SIDES = ("A", "B")
STRATEGIES = ("linearize", "linearize_apply", "vmap_jvp", "jvp_loop", "jacfwd")
#: Every tenth case of the candidate is this much slower.
SLOWDOWN = 1.05
CACHE = {"dir": None, "min_compile_time_secs": 1.0, "cache_hits": 0, "cache_misses": 1,
         "compile_reused_in_process": False}  # fmt: skip
COMMANDS = {
    "show": ["show", "A", "B"],
    "compare": ["compare", "A", "B"],
    "report": ["report", "A", "B", "-o", "report"],
}


def base_env() -> dict[str, Any]:
    """A record's ``env`` as ``jaxbench run`` makes it on this machine (CPU backend)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from jaxbench.env import collect
    from jaxbench.measure import TimingConfig

    env = collect()
    return env | {"timing": TimingConfig().recorded(), "requested_backend": "cpu", "gpu": None}


def _cases(n: int) -> list[tuple[str, dict[str, Any]]]:
    """``n`` forward-mode cases as ``jaxbench run`` names them: strategy, wrt, then K 1, 2, ..."""
    out = []
    for i in range(n):
        strategy, wrt, k = STRATEGIES[i % 5], ("input", "params")[i // 5 % 2], i // 10 + 1
        params = {"size": "tiny", "dtype": "float32", "k": k, "strategy": strategy, "wrt": wrt}
        out.append((f"forward/{strategy}", params))
    return out


def _process_records(
    env: dict[str, Any], version: str, cases: int, samples: int, rng: random.Random
) -> Iterator[Record]:
    """One process's records: every case once, in order, with this process's env."""
    run_id = new_run_id()
    env = env | {"jax": version, "jaxlib": version, "process_id": uuid.uuid4().hex,
                 "pid": rng.randrange(1000, 4_000_000)}  # fmt: skip
    process = rng.lognormvariate(0.0, 0.02)  # the process's own level
    for i, (benchmark, params) in enumerate(_cases(cases)):
        slower = SLOWDOWN if version == VERSIONS[1] and i % 10 == 0 else 1.0
        median = 1e-4 * (1 + i % 17) * process * slower
        times = [median * rng.lognormvariate(0.0, 0.05) for _ in range(samples)]
        cpu = sum(times) * 0.98
        noise = {"wall_s": sum(times) * 1.01, "cpu_s": cpu, "cpu_share": 0.98,
                 "ctx_involuntary": rng.randrange(20), "ctx_voluntary": rng.randrange(5),
                 "gc_collections": 0, "loadavg_start": 0.5, "loadavg_end": 0.6,
                 "steal_share": 0.0, "usable_cpus": env["host"].get("usable_cpus")}  # fmt: skip
        yield Record(
            run_id=run_id,
            benchmark=benchmark,
            params=params,
            status="ok",
            samples_s=times,
            lower_s=0.05 * rng.lognormvariate(0.0, 0.1),
            compile_s=0.2 * rng.lognormvariate(0.0, 0.1),
            first_call_s=0.25,
            compiles_setup=2,
            compiles_timed=0,
            traces_timed=0,
            flops=2.0e6 * (1 + i % 17),
            bytes_accessed=1.0e5,
            host_peak_rss_bytes=400_000_000,
            memory={"temp_size_in_bytes": 4096, "output_size_in_bytes": 1024},
            compilation_cache=CACHE,
            gate={"rtol": 1e-5, "atol": 1e-6, "max_abs_error": 0.0},
            noise=noise,
            env=env,
            started_at=_dt.datetime.now(_dt.UTC).isoformat(),
        )


def generate(
    folder: str | os.PathLike[str],
    records: int,
    cases: int = 250,
    samples: int = 20,
    seed: int = 0,
    env: dict[str, Any] | None = None,
) -> dict[str, int]:
    """Write about ``records`` synthetic records under ``folder``/A and ``folder``/B.

    Args:
        folder: Where to write (``A/`` and ``B/`` are made in it).
        records: Records in all, both sides together; rounded up to whole processes of
            ``cases`` records, at least one process a side.
        cases: Cases a process (one record each).
        samples: Timed samples a record.
        seed: Seed of the synthetic timings.
        env: A record's ``env`` (default :func:`base_env`, which imports JAX).

    Returns:
        ``{"records": written, "files": files, "bytes": bytes on disk}``.

    Raises:
        ValueError: ``records``, ``cases`` or ``samples`` below 1.
    """
    if min(records, cases, samples) < 1:
        raise ValueError(f"records {records}, cases {cases}, samples {samples}: each must be >= 1")
    env = env if env is not None else base_env()
    rng = random.Random(seed)
    per_side = max(1, -(-records // (2 * cases)))
    out = {"records": 0, "files": 0, "bytes": 0}
    for side, version in zip(SIDES, VERSIONS, strict=True):
        for _ in range(per_side):
            found = list(_process_records(env, version, cases, samples, rng))
            path = write_jsonl(Path(folder) / side / f"{found[0].run_id}.jsonl", found)
            out["records"] += len(found)
            out["files"] += 1
            out["bytes"] += path.stat().st_size
    return out


def time_command(args: list[str], cwd: Path, timeout_s: float | None = None) -> dict[str, Any]:
    """Run ``python -m jaxbench <args>`` in ``cwd``: wall seconds, peak RSS bytes, exit status.

    A command still running after ``timeout_s`` seconds is killed (``timed_out`` true; its
    exit status is then the kill's). The child is polled every 10 ms for its end.
    """
    log = cwd / f"{args[0]}.log"
    timed_out = False
    with log.open("wb") as sink:
        start = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "jaxbench", *args], cwd=cwd,
                                 stdout=sink, stderr=subprocess.STDOUT)  # fmt: skip
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)  # this child's own rusage
            if pid:
                break
            if timeout_s is not None and not timed_out and time.perf_counter() - start > timeout_s:
                child.kill()
                timed_out = True
            time.sleep(0.01)
        wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    tail = log.read_text(errors="replace").splitlines()[-3:]
    return {"command": " ".join(["jaxbench", *args]), "wall_s": wall,
            "peak_rss_bytes": usage.ru_maxrss * 1024, "returncode": child.returncode,
            "timed_out": timed_out, "output_tail": tail}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="5000,50000",
                        help="Store sizes, comma-separated (records, both sides).")  # fmt: skip
    parser.add_argument("--cases", type=int, default=250, help="Cases a process (file).")
    parser.add_argument("--samples", type=int, default=20, help="Timed samples a record.")
    parser.add_argument("--commands", default=",".join(COMMANDS),
                        help=f"Commands to time, of {', '.join(COMMANDS)}.")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="Seconds a command may run before it is killed.")  # fmt: skip
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "store-scale",
                        help="Folder of the results file.")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.records.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--records {args.records!r}: expected whole numbers separated by commas")
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    if unknown := [c for c in commands if c not in COMMANDS]:
        parser.error(f"--commands {unknown[0]!r}: expected one of {', '.join(COMMANDS)}")
    if args.timeout <= 0:
        parser.error(f"--timeout {args.timeout}: expected seconds above 0")
    if not sizes or min(sizes) < 1:
        parser.error(f"--records {args.records!r}: expected sizes of at least 1")
    from jaxbench.env import host

    env = base_env()
    run_id = new_run_id()
    result: dict[str, Any] = {
        "kind": "store-scale", "schema_version": 1, "run_id": run_id,
        "started_at": _dt.datetime.now(_dt.UTC).isoformat(), "host": host(),
        "python": platform.python_version(), "jax": env["jax"], "commit": env["git"]["commit"],
        "cases_per_process": args.cases, "samples_per_record": args.samples, "rows": [],
    }  # fmt: skip
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="store-scale-") as tmp:
            folder = Path(tmp)
            made = generate(folder, size, args.cases, args.samples, env=env)
            print(f"{made['records']} records in {made['files']} files "
                  f"({made['bytes'] / 2**20:.1f} MiB)", flush=True)  # fmt: skip
            for name in commands:
                row = made | time_command(COMMANDS[name], folder, args.timeout)
                ended = "killed at --timeout" if row["timed_out"] else f"exit {row['returncode']}"
                print(f"  {row['command']}: {row['wall_s']:.2f} s, peak RSS "
                      f"{row['peak_rss_bytes'] / 2**20:.0f} MiB, {ended}", flush=True)  # fmt: skip
                result["rows"].append(row)
    result["finished_at"] = _dt.datetime.now(_dt.UTC).isoformat()
    args.out.mkdir(parents=True, exist_ok=True)
    dest = args.out / f"store-scale-{run_id}.json"
    dest.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
