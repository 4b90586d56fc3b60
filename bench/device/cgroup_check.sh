#!/usr/bin/env bash
# The workers' memory cgroups (executor/cgroup.py) on the GPU device, whose cgroup is v2 (the dev machine's
# is v1), in one call (~60-110 s): the facts (kernel, /proc/self/cgroup, the cgroup2 mount, the controllers
# enabled), a tiny v2 probe outside the executor (what "auto" finds: off there since review 40 M2, the device's
# own cgroup holding its agent's processes and not delegated; then the place named: a cgroup directory this
# script makes beside its own cgroup, regraph-check-<pid>, with memory enabled for its children, given
# to the executor and the tests as REGRAPH_EXECUTOR_MEMORY_CGROUPS and removed at the end; a cgroup made, limited to 64 MiB, a child
# in it that fills a 256-MiB memfd, killed by the kernel; its figures; cgroup.kill and the removal), the new
# tests (tests/unit/executor/test_cgroup_place.py, tests/integration/executor/test_worker_memory_cgroup.py:
# jailed host-runtime workers, a memfd and a tmpfs hoarder refused, honest saxpy passing, no cgroup left),
# then, where pycuda is there, tests/gpu/test_runner_memory_gpu.py (a 3-GiB limit on a GPU: honest saxpy
# passes in its cgroup, an 8-GiB hog is refused), and what regraph-* cgroups are left anywhere.
# Carry: .whlgpu (renamed .whl here, as run_checks_call.sh does) or .whl: pydantic & co, and pycuda's wheel
# for the GPU test (not built here when missing: the test is left out).
# Writes to $OUT: facts.txt, probe.txt, tests.log, gpu_test.log, left.txt. Knob: DEADLINE_S (110).
set -uo pipefail
S=$(date +%s)
left() { echo $(( ${DEADLINE_S:-110} - $(date +%s) + S )); }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# shellcheck source=bench/device/carried_wheels.sh
source bench/device/carried_wheels.sh || exit 1
{
  date -u; uname -r; id -u
  echo "/proc/self/cgroup:"; cat /proc/self/cgroup
  grep -E " - cgroup2? " /proc/self/mountinfo
  own=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
  for d in /sys/fs/cgroup "$(dirname "$own")" "$own"; do
    echo "$d: controllers [$(cat "$d/cgroup.controllers" 2>&1)] subtree_control [$(cat "$d/cgroup.subtree_control" 2>&1)]" \
      "procs $(wc -l < "$d/cgroup.procs" 2>/dev/null)"
  done
  ls /sys/fs/cgroup/cgroup.kill "$own/cgroup.kill" "$own/memory.peak" "$own/memory.swap.max" 2>&1
  which g++ unshare; python3 --version
} > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"
# The place named for this run: beside this process's own cgroup, under the parent that enables memory.
own=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
CHECK="$(dirname "$own")/regraph-check-$$"
removecheck() {
  for d in "$CHECK"/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
  [ -d "$CHECK" ] && rmdir "$CHECK" && echo "removed $CHECK"
}
trap removecheck EXIT
if mkdir "$CHECK" && echo +memory > "$CHECK/cgroup.subtree_control"; then
  export REGRAPH_EXECUTOR_MEMORY_CGROUPS="$CHECK"
  echo "named: $CHECK: controllers [$(cat "$CHECK/cgroup.controllers")] subtree_control [$(cat "$CHECK/cgroup.subtree_control")]" | tee -a "$OUT/facts.txt"
else
  echo "could not make $CHECK with memory for its children" | tee -a "$OUT/facts.txt"
fi
timeout 30 python3 - > "$OUT/probe.txt" 2>&1 <<'PY'
import logging, os, subprocess, sys, time
logging.basicConfig(level=logging.INFO)
from executor.cgroup import WorkerCgroup, enter, find_place
print("auto:", find_place("auto").says)
found = find_place(os.environ.get("REGRAPH_EXECUTOR_MEMORY_CGROUPS", "auto"))
print("placement:", found.says)
if found.place is None:
    sys.exit(0)
cgroup = WorkerCgroup.make(found.place)
print("made", cgroup.path, sorted(p.name for p in cgroup.path.iterdir() if p.name.startswith(("memory.", "cgroup."))))
cgroup.limit(64 << 20)
for name in ("memory.oom.group", "memory.max", "memory.swap.max", "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
    if (cgroup.path / name).exists():
        print(name, (cgroup.path / name).read_text().strip())
fd = cgroup.open_procs()
fill = "import os\nf = os.memfd_create('hoard')\nfor _ in range(256): os.write(f, b'1' * (1 << 20))\nprint('filled', flush=True)\n"
began = time.monotonic()
child = subprocess.run([sys.executable, "-c", fill], preexec_fn=lambda: enter(fd), capture_output=True, text=True, timeout=20)
os.close(fd)
print(f"child rc {child.returncode} after {time.monotonic() - began:.2f}s, stdout {child.stdout.strip()!r}")
figures = cgroup.memory()
print("figures:", figures, "exceeded:", figures.exceeded, "|", figures.describe())
if (cgroup.path / "memory.events").exists():
    print("memory.events:", (cgroup.path / "memory.events").read_text().split())
fd = cgroup.open_procs()
sleeper = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: enter(fd))
os.close(fd)
time.sleep(0.2)
print("in it before the removal:", cgroup.processes())
began = time.monotonic()
print("removed:", cgroup.remove(), f"in {time.monotonic() - began:.3f}s; sleeper rc {sleeper.wait(timeout=5)}; gone: {not cgroup.path.exists()}")
PY
echo "probe rc $? at $(( $(date +%s) - S )) s"; cat "$OUT/probe.txt"
timeout $(( $(left) - 5 )) python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA \
  tests/unit/executor/test_cgroup_place.py tests/integration/executor/test_worker_memory_cgroup.py > "$OUT/tests.log" 2>&1
echo "tests rc $? at $(( $(date +%s) - S )) s"; grep -E "^(FAILED|ERROR|SKIPPED)|honest saxpy|passed|failed|skipped" "$OUT/tests.log" | tail -12
if python3 -c "import pycuda.driver" 2>/dev/null && [ "$(left)" -gt 40 ]; then
  timeout $(( $(left) - 5 )) python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA -m gpu \
    tests/gpu/test_runner_memory_gpu.py > "$OUT/gpu_test.log" 2>&1
  echo "gpu test rc $? at $(( $(date +%s) - S )) s"; grep -E "^(FAILED|ERROR)|honest saxpy:|hog:|passed|failed" "$OUT/gpu_test.log" | tail -8
else
  echo "gpu test not run (no pycuda, or $(left) s left)" | tee "$OUT/gpu_test.log"
fi
removecheck; trap - EXIT
find /sys/fs/cgroup -maxdepth 5 -name 'regraph-*' > "$OUT/left.txt" 2>/dev/null
echo "regraph cgroups left: $(wc -l < "$OUT/left.txt")"; head -5 "$OUT/left.txt"
