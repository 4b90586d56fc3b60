#!/usr/bin/env bash
# Session 28 (issue 33's trial count, issue 29's host noise): do host-timed function trials get quieter,
# and fewer, when the worker that times them has cores that no compile uses? ONE call on nvidia-h200 of
# <= 400 s (BUDGET_S, 390). The setting: REGRAPH_EXECUTOR_TIMING_CORES=N (executor.fleet.pinning, off by
# default when this was written; automatic since session 29, and this script sets it for each run): the last N CPUs of the executor's (whole physical cores) kept for a worker while it holds a
# function task's trials' lock; nvcc/NVRTC builds and every worker outside its trials on the rest.
# Steps, each noted in $OUT/steps.txt:
#   1. affinity: is an affinity enforced here (gVisor may accept and ignore it)? Two busy loops pinned
#      to one CPU against one alone (a ratio near 0.5: enforced; near 1: not), the last CPUs' hyperthread
#      siblings, and the split that TCORES (2) gives: $OUT/affinity.txt;
#   2. the `long`-queue A/B on GPU 0 (bench/device/run_s18_ab.sh, AB_SECONDS 90-s windows, rate after
#      40 s) in the order ORDER (default "new tcores new2": this tree with its defaults, the same with
#      REGRAPH_EXECUTOR_TIMING_CORES=$TCORES, the defaults again, so that an order effect shows):
#      $OUT/ab/summary.md (rate, and per correct function/kernel candidate gpu_held, timing_trials,
#      trials, robust CoV), $OUT/ab/s18_ab.tar.gz (every verdict's record);
#      meanwhile a sampler (on CPU 0, every 0.2 s) counts the cores of the nvcc builds' processes and of
#      the workers by run: $OUT/masks.md (tcores: builds on the rest only, candidate workers on the rest
#      or on the reserved cores; new: everything on all cores);
#   3. traces (seconds, no GPU): bench.probes.trial_trace of the function candidates of each run (the
#      bursts of slow trials that trials41.md found beside compiles): $OUT/traces.md.
# Carry [".whlgpu"] (copied from the main checkout before the call). Run (kind nvidia-h200, timeout_s 400):
#   bash bench/device/run_timing_cores.sh
# What to read: summary.md's function `trials` and `gpu_held`, tcores against new and new2 (call 1 of
# session 28: 11.3 trials, 0.829 s), the rate after 40 s, kernel candidates unchanged; masks.md that the
# split was in force (else the A/B measured nothing); affinity.txt's ratio.
# The x2 warm scaling with the setting (nvidia-h200-x2, carry .whlfleet and .whlray as call 2 of session
# 28): the variable must be in the environment before Ray starts (the replicas read it from theirs, and
# each takes its N from its own share of the host's cores):
#   REGRAPH_EXECUTOR_TIMING_CORES=2 BUDGET_S=440 bash bench/device/run_scaling_warm_x2.sh
# (compare with call 2's 53 % and 18.1 function trials at two replicas, and call 5's 68 %/19.1 with
# REGRAPH_HOST_LOCK_SCOPE=device; both may be exported together).
# Smoke run of the plumbing on a CPU machine (host runtime: function tasks only; TCORES 1 on 2 cores):
#   NO_GPU_ENV=1 RUNTIME=host GPUS=1 LIMIT=2 AB_SECONDS=25 STEADY_AFTER=10 CLIENTS=2 TCORES=1 \
#     ORDER="new tcores" BUDGET_S=200 OUT=/tmp/tcores_out bash bench/device/run_timing_cores.sh
set -uo pipefail
S=$(date +%s)
BUDGET=${BUDGET_S:-390}
left() { echo $(( BUDGET - ($(date +%s) - S) )); }
R=${OUT:-/tmp/out}; export OUT=$R
mkdir -p "$R"
step() { echo "$(date -u +%T) $1 ($(left) s left)" | tee -a "$R/steps.txt"; }
if [ -z "${NO_GPU_ENV:-}" ]; then
  if [ -d .whlgpu ]; then rm -rf .whl; mv .whlgpu .whl; fi
  # shellcheck source=bench/device/gpu_env.sh
  source bench/device/gpu_env.sh > "$R/gpu_env.out" 2>&1 || { tail -20 "$R/gpu_env.out"; exit 1; }
fi
TCORES=${TCORES:-2}; export TCORES
unset REGRAPH_EXECUTOR_TIMING_CORES  # each run of the A/B sets its own

step "affinity"
TCORES=$TCORES python3 - > "$R/affinity.txt" 2>&1 <<'PY'
import multiprocessing as mp, os, time
from executor.fleet.pinning import format_cpulist, split_timing_cores, sibling_groups

def spin(cpu, seconds, out):
    os.sched_setaffinity(0, {cpu})
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        n += 1
    out.put(n)

allowed = sorted(os.sched_getaffinity(0))
print("allowed cores:", format_cpulist(allowed), f"({len(allowed)})")
for cpu in allowed[-4:]:
    try:
        print(f"cpu{cpu} siblings:", open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read().strip())
    except OSError as e:
        print(f"cpu{cpu} siblings: unreadable ({e})")
split = split_timing_cores(allowed, int(os.environ["TCORES"]), sibling_groups(allowed))
print("split for", os.environ["TCORES"], ":", "refused" if split is None else
      f"trials on {format_cpulist(split.reserved)}, the rest {format_cpulist(split.rest)}")
try:
    os.sched_setaffinity(0, {allowed[-1]})
    print("set to", allowed[-1], "read back", format_cpulist(sorted(os.sched_getaffinity(0))))
    os.sched_setaffinity(0, allowed)
except OSError as e:
    print("sched_setaffinity refused:", e)
q = mp.Queue()
counts = {}
for label, procs in (("alone", 1), ("two on one CPU", 2)):
    ps = [mp.Process(target=spin, args=(allowed[-1], 1.5, q)) for _ in range(procs)]
    [p.start() for p in ps]; [p.join() for p in ps]
    counts[label] = sum(q.get() for _ in ps) / procs
ratio = counts["two on one CPU"] / counts["alone"]
print(f"busy loop iterations each: alone {counts['alone']:.3g}, two pinned to cpu{allowed[-1]} "
      f"{counts['two on one CPU']:.3g}: ratio {ratio:.2f} ({'enforced' if ratio < 0.75 else 'NOT enforced'})")
PY
cat "$R/affinity.txt"

step "ab (order ${ORDER:-new tcores new2})"
: > "$R/ab.out"
NO_GPU_ENV=1 OUT=$R/ab QUEUE_KIND=long ORDER="${ORDER:-new tcores new2}" AB_SECONDS=${AB_SECONDS:-90} \
  STEADY_AFTER=${STEADY_AFTER:-40} SCALE_SECONDS=0 DEADLINE_S=$(( $(left) - 15 )) bash bench/device/run_s18_ab.sh \
  >> "$R/ab.out" 2>&1 &
AB=$!
# The sampler: the A/B's processes only (its descendants), by the run that ab.out names last.
python3 - "$R/ab.out" "$AB" "$R/masks.md" <<'PY'
import collections, os, re, sys, time
log, root, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def tree(root):
    """root's descendants, from every process's parent (/proc/N/stat), which gVisor shows too."""
    parents = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            parents[ppid].append(int(entry))
            PARENT[int(entry)] = ppid
    found, todo = [], [root]
    while todo:
        kids = parents.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


PARENT = {}
COMM = {}


def under_nvcc(pid):
    while pid in PARENT and pid > 1:
        pid = PARENT[pid]
        if COMM.get(pid) == "nvcc":
            return True
    return False


def running(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


try:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # off the reserved cores (the last)
except OSError:
    pass
BUILD = {"nvcc", "cicc", "cudafe++", "ptxas", "fatbinary", "nvlink", "cc1plus", "gcc", "g++", "ld", "as", "collect2"}
seen = collections.Counter()
run = "-"


def write():
    with open(out + ".part", "w") as f:
        f.write("| run | process | cores | samples |\n|---|---|---|---|\n")
        for (r, k, c), n in sorted(seen.items()):
            f.write(f"| {r} | {k} | {c} | {n} |\n")
    os.replace(out + ".part", out)


last = time.monotonic()
while running(root):
    try:
        names = re.findall(r"^== (\S+)", open(log).read(), re.M)
        run = names[-1] if names else "-"
    except OSError:
        pass
    PARENT.clear()
    COMM.clear()
    pids = tree(root)
    for pid in pids:
        try:
            COMM[pid] = open(f"/proc/{pid}/comm").read().strip()
        except OSError:
            pass
    for pid in pids:
        try:
            comm = open(f"/proc/{pid}/comm").read().strip()
            status = open(f"/proc/{pid}/status").read()
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        kind = None
        if comm in BUILD:
            kind = "nvcc" if comm == "nvcc" else f"{comm} ({'nvcc' if under_nvcc(pid) else 'not nvcc'}'s)"
        elif "executor.worker" in cmd:
            m = re.search(r"executor\.worker (serve candidate|serve reference|baseline candidate|runner)", cmd)
            kind = (m.group(1) if m else "other") + " worker"
        if kind is None:
            continue
        cores = re.search(r"^Cpus_allowed_list:\s*(\S+)", status, re.M)
        seen[(run, kind, cores.group(1) if cores else "?")] += 1
    time.sleep(0.2)
    if time.monotonic() - last > 10:
        write()
        last = time.monotonic()
write()
PY
wait "$AB"

step "traces"
T=/tmp/tcores_records; rm -rf "$T"; mkdir -p "$T"
tar -xzf "$R/ab/s18_ab.tar.gz" -C "$T" 2>/dev/null
{
  for name in ${ORDER:-new tcores new2}; do
    f=$T/ab/$name.json
    [ -f "$f" ] || { echo "no $name run"; continue; }
    echo "## $(basename "$f" .json): function candidates"; python3 -m bench.probes.trial_trace "$f" --kind function; echo
  done
} > "$R/traces.md" 2>&1
step "end"
grep -A6 "^| config" "$R/ab/summary.md" 2>/dev/null
grep -A6 "^| function" "$R/ab/summary.md" 2>/dev/null
cat "$R/masks.md" 2>/dev/null
