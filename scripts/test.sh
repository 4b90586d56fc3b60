#!/usr/bin/env bash
# The lint/type gate, then the whole test suite. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=/dev/null
source "$ROOT/scripts/env.sh"
cd "$ROOT"
echo "== ruff check" >&2
ruff check .
echo "== ruff format --check" >&2
ruff format --check .
echo "== mypy" >&2
# The incremental cache lives beside the venv, outside the checkout, so that a fresh clone on a warm
# machine checks only what changed: mypy validates each cached module by its source's hash (not its
# path or mtime) and drops entries of another mypy version or configuration.
MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-$REGRAPH_CACHE_DIR/mypy}" mypy
echo "== pytest" >&2
set +e
# Two pytest-xdist workers by default (this machine has two cores), each a session of its own with its
# own Neo4j, handed a whole module (or group, tests/conftest.py) at a time, the slowest first: about
# 675 s of pytest on a clean clone in session 19, 689 s in session 20 (about 1,000 s in one process in
# session 16; bench/results/2026-11-28_s16/suite_speed.md, bench/results/2026-11-29_s20/suite_speed.md).
# REGRAPH_TEST_WORKERS=0 runs one process; another number, that many workers. The 30 slowest items are listed at the end (what to cut next).
# A crash after the tests (in the interpreter's shutdown) prints its threads' stacks too.
PYTHONFAULTHANDLER=1 python -m pytest -n "${REGRAPH_TEST_WORKERS:-2}" --dist loadgroup --durations=30 "$@"
status=$?
set -e
if [ "$status" = 5 ]; then
  echo "pytest collected no tests: the suite must never be empty" >&2
  exit 1
fi
exit "$status"
