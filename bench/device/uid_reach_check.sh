#!/usr/bin/env bash
# The `uid` protection's reach (executor/reach.py) and worker start-up reporting on the GPU device, in one call
# (~30-60 s): the facts (id, the modes of the directories above the interpreter, the checkout and /tmp/site), then
# tests/integration/executor/test_uid_reach.py (the start-up check as a worker's uid and as 65534, each test with a
# 0700 directory of its own), test_worker_start_failure.py (a worker's start-up failure named in its verdict; a
# candidate's write over its log not shown) and test_worker_memory_cgroup.py's uid test (session 39's "status 1
# during startup": its job's files now in a directory of its own under /tmp), that one in a memory cgroup place made
# as bench/device/cgroup_check.sh makes it (regraph-uid-<pid> beside this process's cgroup, removed at the end).
# Carry: .whlgpu (renamed .whl here) or .whl, as cgroup_check.sh. Writes to $OUT: facts.txt, tests.log.
set -uo pipefail
S=$(date +%s)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# shellcheck source=bench/device/carried_wheels.sh
source bench/device/carried_wheels.sh || exit 1
{
  date -u; id
  for p in "$(command -v python3)" "$(readlink -f "$(command -v python3)")" "$PWD" /tmp/site; do
    d=$p; while [ "$d" != / ]; do stat -c '%a %U %n' "$d"; d=$(dirname "$d"); done
  done | sort -u
} > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"
own=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
CHECK="$(dirname "$own")/regraph-uid-$$"
removecheck() {
  for d in "$CHECK"/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
  [ -d "$CHECK" ] && rmdir "$CHECK" && echo "removed $CHECK"
}
trap removecheck EXIT
if mkdir "$CHECK" && echo +memory > "$CHECK/cgroup.subtree_control"; then
  export REGRAPH_EXECUTOR_MEMORY_CGROUPS="$CHECK"
else
  echo "could not make $CHECK with memory for its children: the memory-cgroup test skips" | tee -a "$OUT/facts.txt"
fi
timeout 300 python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA \
  tests/integration/executor/test_uid_reach.py tests/integration/executor/test_worker_start_failure.py \
  "tests/integration/executor/test_worker_memory_cgroup.py::test_a_worker_without_the_namespace_jail_is_in_its_cgroup_too" \
  > "$OUT/tests.log" 2>&1
echo "tests rc $? at $(( $(date +%s) - S )) s"; grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed|skipped" "$OUT/tests.log" | tail -12
removecheck; trap - EXIT
