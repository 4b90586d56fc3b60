#!/usr/bin/env bash
# Review 40b's jail and cgroup Lows (session 40, branch low41) on the GPU device's kernel and cgroup v2, in one
# call (~30-60 s): the facts (kernel, the pid and cgroup namespaces' inodes, /proc/self/cgroup), then the
# tests that make jails and namespaces: tests/unit/executor/test_executor_jail.py's /proc/sys (L-a), the
# cover of /sys/fs/cgroup (L-c) and the jail without a cgroup namespace (L-b, a seccomp filter), and
# tests/unit/executor/test_cgroup_place.py (L-e's real cgroup namespace, L-f's real pid namespace).
# Carry: .whlgpu (renamed .whl here, as run_checks_call.sh does) or .whl. Writes $OUT/facts.txt, $OUT/tests.log.
# Knob: DEADLINE_S (90).
set -uo pipefail
S=$(date +%s)
left() { echo $(( ${DEADLINE_S:-90} - $(date +%s) + S )); }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# shellcheck source=bench/device/carried_wheels.sh
source bench/device/carried_wheels.sh || exit 1
{
  date -u; uname -r; id -u
  echo "pid ns $(stat -L -c %i /proc/self/ns/pid) (initial 4026531836), cgroup ns $(stat -L -c %i /proc/self/ns/cgroup) (initial 4026531835)"
  cat /proc/self/cgroup
  which setpriv unshare; python3 --version
} > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"
timeout $(( $(left) - 30 )) python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA \
  tests/unit/executor/test_executor_jail.py -k "sysctls or cgroup_is_seen or without_cgroup or chroot_out or locked" > "$OUT/tests.log" 2>&1
echo "jail tests rc $? at $(( $(date +%s) - S )) s"
timeout $(( $(left) - 5 )) python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA \
  tests/unit/executor/test_cgroup_place.py >> "$OUT/tests.log" 2>&1
echo "cgroup tests rc $? at $(( $(date +%s) - S )) s"; grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed|skipped" "$OUT/tests.log" | tail -14
