#!/usr/bin/env bash
# One all-reduce over two CPU devices three ways, on this machine: both devices in one process
# (XLA_FLAGS), two JAX processes (run --jax-processes 2, Gloo), and a Slurm job of two tasks on
# the test suite's single-node Slurm (scripts/slurm-local). Run it alone; docs/measures.md
# quotes it. Usage: scripts/bench_processes.sh [OUT] (default results/processes/<UTC time>).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/processes/$(date -u +%Y%m%dT%H%M%SZ)}
py=.venv/bin/python
mkdir -p "$out"
case_args=(-w collectives --param op=all_reduce --param devices=2 --param bytes=4096
           --param bytes=4194304 --budget 0 --min-samples 200 --warmup 5)
walls="$out/wall-times.txt"
: > "$walls"
timed() {  # NAME COMMAND...: the command's wall seconds, appended to wall-times.txt
  local name=$1 start end
  shift
  start=$(date +%s.%N)
  "$@"
  end=$(date +%s.%N)
  echo "$name $(echo "$end - $start" | bc) s" | tee -a "$walls"
}

timed one-process env XLA_FLAGS=--xla_force_host_platform_device_count=2 \
  "$py" -m jaxbench run "${case_args[@]}" -o "$out/one-process"
timed two-processes "$py" -m jaxbench run "${case_args[@]}" --jax-processes 2 \
  -o "$out/two-processes"

slurm_dir=$(mktemp -d)
trap 'scripts/slurm-local stop "$slurm_dir" >/dev/null || true' EXIT
eval "$(scripts/slurm-local start "$slurm_dir" | grep '^export ')"
sed 's/^cpus_per_task = 1$/cpus_per_task = 1\ntasks_per_node = 2/' slurm/test-cluster.toml \
  > "$out/two-tasks.toml"
timed slurm-two-tasks "$py" -m jaxbench submit -p "$out/two-tasks.toml" "${case_args[@]}" \
  --sweeps-dir "$slurm_dir/sweeps" --wait
mkdir -p "$out/slurm-two-tasks"
cp "$slurm_dir"/sweeps/sweep-*/results.jsonl "$out/slurm-two-tasks/"
sacct -X --format=JobID,Submit,Start,End,Elapsed,NTasks,State -P > "$out/sacct.txt"
cat "$out/sacct.txt"
