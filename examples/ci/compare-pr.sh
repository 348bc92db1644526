#!/usr/bin/env bash
# Did this pull request make a workload slower? The CI recipe of jaxbench (docs/ci.md).
#
#   compare-pr.sh BASE_DIR HEAD_DIR WORKLOAD [jaxbench compare options ...]
#
# BASE_DIR and HEAD_DIR are checkouts of your repository at the pull request's base and head;
# WORKLOAD is your factory, package.module:factory. PYTHON (default python3) is an interpreter
# with jaxbench, JAX and your package's dependencies installed (your package itself, if
# installed there, not as editable: an editable install's import hook would serve both
# sides). For each side this makes a
# venv under JAXBENCH_PR_DIR (default .jaxbench-pr) that sees PYTHON's packages and has that
# checkout installed over them (pip install --no-deps), then runs a live interleaved comparison
# of WORKLOAD between the two sides: both run now, on this machine, in pairs of fresh
# processes. It writes
#   jaxbench-verdicts.json              the verdicts (compare --json), and
#   $GITHUB_STEP_SUMMARY                the Markdown summary (compare --markdown; appended;
#                                       jaxbench-summary.md outside GitHub Actions).
# Its exit status is compare's: 0 no case is slower, 1 one is, 2 bad input, 3 none is slower
# but one is undecided (only with --fail-on-undecided).
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 BASE_DIR HEAD_DIR WORKLOAD [jaxbench compare options ...]" >&2
  exit 2
fi
base=$1 head=$2 workload=$3
shift 3
python=${PYTHON:-python3}
work=${JAXBENCH_PR_DIR:-.jaxbench-pr}
summary=${GITHUB_STEP_SUMMARY:-jaxbench-summary.md}
for dir in "$base" "$head"; do
  if [ ! -d "$dir" ]; then
    echo "$0: $dir: no such folder (expected a checkout of your repository)" >&2
    exit 2
  fi
done
# As paths: pip reads a bare "base" as the name of a package on the index, not this folder.
base=$(cd "$base" && pwd) head=$(cd "$head" && pwd)
purelib='import sysconfig; print(sysconfig.get_paths()["purelib"])'
outer=$("$python" -c "$purelib")
side() {  # side NAME CHECKOUT: a venv over PYTHON's packages with CHECKOUT installed
  local env="$work/$1"
  "$python" -m venv --clear "$env"
  # PYTHON's packages (and their own .pth files: editable installs) come after the venv's
  # own, so the checkout installed here is the one imported.
  echo "import site; site.addsitedir('$outer')" >"$("$env/bin/python" -c "$purelib")/_jaxbench_pr_outer.pth"
  "$env/bin/python" -m pip install --quiet --no-deps "$2"
}
side base "$base"
side head "$head"
# The head's interpreter runs the comparison: it reads the workload's parameters from the
# head's code. Each side's workers run in that side's venv.
exec "$work/head/bin/python" -m jaxbench compare "$work/base/bin/python" "$work/head/bin/python" \
  --interleave -w "$workload" --json jaxbench-verdicts.json --markdown "$summary" "$@"
