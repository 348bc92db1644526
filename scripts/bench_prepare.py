"""Fixed cost of one live worker, part by part: start, imports, build, compile, gate, warm-up.

Starts ``--runs`` fresh processes one after the other; each prepares one case the way a live
worker does (``jaxbench.interleave.worker``'s ``prepare`` request, the same code path), with a
clock around every part: interpreter start (spawn to the first line of the child), the worker's
own start-path imports, ``import jax``, the backend's start (first device), the seeded
parameter init and the batch, the optimizer state, lowering, compiling (and describing) the
programs, the correctness gate, putting the state on the device, the first call and warm-up
calls, and the environment facts of the answer. Prints a Markdown table of each part's median
and range over the runs (seconds).

With ``--gated``, a first process prepares the case and every timed one is then sent that
program's hash as already gated (``gated`` in the prepare request), as the second and later
pairs of a live comparison are; a worker that does not know ``gated`` ignores it.

Run it on an idle machine: on a shared one the figures are rough. The processes import
jaxbench from the current folder first (``python -c``), so to measure another checkout run the
script from that checkout's root.
Usage: .venv/bin/python scripts/bench_prepare.py [--runs 3] [--workload train_step]
       [--param size=small] [--param dtype=float32] [--backend cpu] [--warmup 10] [--gated]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CHILD = r"""
import json, sys, time
spawned = float(sys.argv[1])
marks = {"interpreter start": time.time() - spawned}
request = json.loads(sys.argv[2])
parts = {}

def clock(name):
    class Clock:
        def __enter__(self):
            self.t0 = time.perf_counter()
        def __exit__(self, *exc):
            parts[name] = parts.get(name, 0.0) + time.perf_counter() - self.t0
    return Clock()

def timed(name, fn):
    def wrapped(*args, **kwargs):
        with clock(name):
            return fn(*args, **kwargs)
    return wrapped

import os
from jaxbench.backends import JAX_PLATFORMS
if request["backend"] in JAX_PLATFORMS:
    os.environ["JAX_PLATFORMS"] = JAX_PLATFORMS[request["backend"]]
with clock("worker start-path imports"):
    from jaxbench.interleave import worker
with clock("import jax"):
    import jax
with clock("imports of prepare"):
    from jaxbench import env, prepared
    from jaxbench.workloads import get_workload, mlp
with clock("backend start (first device)"):
    prepared.resolve_device(request["backend"])

prepared.compile_targets = timed("compile_targets", prepared.compile_targets)
prepared.measure = timed("first call + warm-up", prepared.measure)
env.collect = timed("environment facts", env.collect)
for name, label in (("init", "seeded param init"), ("init_host", "seeded param init"),
                    ("make_batch", "batch"), ("make_batch_host", "batch")):
    if hasattr(mlp, name):  # the host versions where this jaxbench has them
        setattr(mlp, name, timed(label, getattr(mlp, name)))
spec = get_workload(request["workload"])
build = spec.build

def build_timed(params):
    with clock("build (all)"):
        built = build(params)
    if hasattr(built, "gate"):  # a Step, frozen (jaxbench since the one workload protocol)
        import dataclasses

        return dataclasses.replace(built, gate=timed("gate", built.check))
    built.check = timed("gate", built.check)
    return built

spec.build = build_timed
with clock("prepare (all)"):
    answer = worker._Case().prepare(request)
parts["lower"] = answer["lower_s"]
parts["compile"] = answer["compile_s"]
parts["describe programs"] = parts.pop("compile_targets") - answer["lower_s"] - answer["compile_s"]
known = ("build (all)", "lower", "compile", "describe programs", "gate", "first call + warm-up",
         "environment facts")
parts["other (state on device, hash, finite check)"] = (
    parts["prepare (all)"] - sum(parts.get(k, 0.0) for k in known)
)
parts["build: other (optimizer state, ...)"] = (
    parts["build (all)"] - parts["seeded param init"] - parts["batch"]
)
print(json.dumps({"parts": marks | parts, "answer": {k: answer.get(k) for k in (
    "gate_mode", "programs_hash", "warmup_compiles", "compilation_cache_dir")},
    "total": time.time() - spawned}))
"""

ORDER = (
    "interpreter start",
    "worker start-path imports",
    "import jax",
    "imports of prepare",
    "backend start (first device)",
    "seeded param init",
    "batch",
    "build: other (optimizer state, ...)",
    "lower",
    "compile",
    "describe programs",
    "gate",
    "first call + warm-up",
    "environment facts",
    "other (state on device, hash, finite check)",
)


def one(request: dict) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, repr(time.time()), json.dumps(request)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workload", default="train_step")
    parser.add_argument("--param", action="append", default=[], help="NAME=VALUE")
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--gated", action="store_true", help="send the program as gated")
    parser.add_argument("--out", help="also save the raw figures here (JSON)")
    args = parser.parse_args()
    params = {"size": "small", "dtype": "float32", "optimizer": "sgd", "donate": True}
    for item in args.param:
        name, _, value = item.partition("=")
        params[name] = {"true": True, "false": False}.get(value, value)
    request = {"op": "prepare", "workload": args.workload, "params": params,
               "backend": args.backend, "warmup": args.warmup}  # fmt: skip
    if args.gated:
        digest = one(request)["answer"].get("programs_hash")
        request["gated"] = [digest] if digest else []
    runs = [one(request) for _ in range(args.runs)]
    print(f"{args.workload} {params} on {args.backend}; {args.runs} fresh processes"
          f"{', program sent as gated' if args.gated else ''}\n")  # fmt: skip
    print("| part | median s | min s | max s |")
    print("| --- | --- | --- | --- |")
    for name in ORDER:
        xs = [r["parts"].get(name, 0.0) for r in runs]
        print(f"| {name} | {statistics.median(xs):.3f} | {min(xs):.3f} | {max(xs):.3f} |")
    totals = [r["total"] for r in runs]
    print(f"| **spawn to answer** | {statistics.median(totals):.3f} | {min(totals):.3f} | "
          f"{max(totals):.3f} |")  # fmt: skip
    print(f"\nanswers: {[r['answer'] for r in runs]}")
    if args.out:
        save(args.out, request, runs)


def save(path: str, request: dict, runs: list[dict]) -> None:
    """Write the raw runs with the checkout's commit and the machine (JSON)."""
    import datetime
    import os
    import platform

    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip() or None  # fmt: skip
    facts = {
        "kind": "prepare_cost",
        "measured_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "checkout": os.getcwd(),
        "commit": commit,
        "host": {
            "machine": platform.machine(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "request": request,
        "runs": runs,
    }
    with open(path, "w") as f:
        json.dump(facts, f, indent=1)


if __name__ == "__main__":
    main()
