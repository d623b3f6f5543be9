#!/usr/bin/env bash
# Mutation testing of effsearch's core with mutmut 3 (docs/benchmarks.md, "Mutation testing of the core").
#
#   benchmarks/mutation.sh                      # every mutant of the modules setup.cfg's [mutmut] names
#   benchmarks/mutation.sh 'effsearch.search.pareto.*'    # some of them (mutmut's mutant-name globs)
#
# mutmut is not a project dependency: it lives in a throwaway venv ($MUTMUT_VENV) that also sees
# the project's .venv (torch, Composer, Optuna), so it runs the tests in-process and forks a child
# per mutant. It runs in a copy of the working tree ($MUTATION_DIR), never in the checkout: mutmut
# writes its mutated copy under mutants/. Prints killed / total per module at the end
# (benchmarks/mutation_scores.py; "pruners (rungs)" is MO-ASHA's and SlowStop's pure rung functions).
# MUTATION_JOBS: mutants at a time (2); MUTATION_DEBUG=1: mutmut prints each pytest command and its output.
# Exit status: mutmut's (a failed clean run or stats collection is not a score).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${MUTATION_DIR:-/tmp/effsearch-mutation}
TOOL=${MUTMUT_VENV:-/tmp/effsearch-mutmut}
PROJECT_PY="$ROOT/.venv/bin/python"

if [ ! -x "$TOOL/bin/mutmut" ]; then
    uv venv -q --python "$PROJECT_PY" "$TOOL"
    uv pip install -q --python "$TOOL/bin/python" "mutmut==3.8.1"
fi
# The project's packages, after mutmut's own (a plain path: the project's editable-install .pth,
# which would put the checkout's effsearch ahead of the mutated copy, is not read).
site() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
site "$PROJECT_PY" > "$(site "$TOOL/bin/python")/zz_effsearch_project.pth"

# A fresh copy of the tracked and untracked, not ignored files: no results cached from another tree.
case "$WORK" in /|"$ROOT"|"$ROOT"/*|"$HOME") echo "MUTATION_DIR=$WORK: pick a scratch folder" >&2; exit 2;; esac
rm -rf "$WORK"
mkdir -p "$WORK"
(cd "$ROOT" && git ls-files -co --exclude-standard -z) | (cd "$ROOT" && "$PROJECT_PY" -c '
import os, shutil, sys
for name in sys.stdin.buffer.read().decode().split("\0"):
    if name and os.path.isfile(name):
        os.makedirs(os.path.join(sys.argv[1], os.path.dirname(name)), exist_ok=True)
        shutil.copy2(name, os.path.join(sys.argv[1], name))
' "$WORK")

cd "$WORK"
export TQDM_DISABLE=1
mkdir -p mutants  # on the path before Python starts: a folder missing then is never searched
export PYTHONPATH="$WORK/mutants"  # the tests import the mutated copy, and so do the Python processes they start
[ -n "${MUTATION_DEBUG:-}" ] && echo "debug = true" >> setup.cfg
status=0
nice -n 19 "$TOOL/bin/mutmut" run --max-children "${MUTATION_JOBS:-2}" "$@" || status=$?
"$TOOL/bin/python" "$ROOT/benchmarks/mutation_scores.py" mutants
exit "$status"
