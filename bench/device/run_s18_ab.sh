#!/usr/bin/env bash
# Session 18 (issues 33 and 29), ONE device call of <= 560 s on nvidia-h200-x2 (or nvidia-h200: the
# scaling step is then skipped and said so). Two steps, each only when it still fits in DEADLINE_S:
#   1. Issue 33's cost on GPU 0 alone: the `long` queue (bench.probes.throughput: 8 function + 8 kernel
#      tasks x 30 correct candidates, failing ones and 3 hangs; 12 compile workers, 16 clients, seed 0,
#      --single) for AB_SECONDS (70) each, in the order ORDER (default "new base new2": this tree with
#      its defaults, main at 57d0025 before issue 33's timing changes, this tree again), then one table
#      (bench.probes.throughput --compare: evaluations/hour in the window and after STEADY_AFTER (30) s,
#      lock held, function/kernel time under the lock, trials, repeat CoV of the same candidate's timings).
#   2. Issue 29's scaling with this tree: the mixed queue at saturation (every task, --per-task 4,
#      16 clients per replica, a fresh cache each) on a Ray fleet of 1 then 2 replicas, SCALE_SECONDS
#      (70, or what is left when less; skipped below 45) of queue each, hard stop, rate after
#      STEADY_AFTER too, and the table of where the time goes (time under the lock, trials, baseline
#      timing, context lock wait) per fleet size.
# $OUT gets at most 5 files: env.txt, summary.md (both tables and each run's first lines), s18_ab.tar.gz
# (every A/B run's JSON, markdown and log) and s18_scaling.tar.gz (the scaling runs' JSONs and logs),
# packed again after every run so that a call cut short still brings back what it finished.
# Carry: .whlgpu and .whlray as for call 1 (bench/results/2026-11-29_s18/README.md), and .base holding
# ONLY base.tgz (~230 KB; the full tree would not fit under the 64 MiB carry limit), made here before
# the call from the repository's history (.git does not travel):
#   rm -rf .base && mkdir .base && git archive 57d0025 -- executor bench/__init__.py bench/throughput.py \
#     bench/executor_bench.py bench/tasks bench/kernel_tasks | gzip -9 > .base/base.tgz
#   grep -qx '/.base/' .git/info/exclude || echo /.base/ >> .git/info/exclude
# Run (carry [".whlgpu", ".whlray", ".base"], kind nvidia-h200-x2, timeout_s 560; ~530 s):
#   rm -rf .whl; mv .whlgpu .whl; export RAY_WHEELS=.whlray; source bench/device/gpu_env.sh; \
#     bash bench/device/run_s18_ab.sh
# A run named sets2... in ORDER is this tree with two timing sets instead of three (`timing_sets: 2`:
# at least 5 trials instead of 7, the median still a repeat visit; session 21). A run named kspots... is
# this tree with the kernel tasks' spot checks on (`kernel_spot_checks: true`, session 22): their cost.
# A run named pairs... is this tree with the stop rule over repeat pairs on (`repeat_pairs: 5`, session
# 23: noise and median over the repeat visits from 10 trials; off by default until this A/B). A run named
# c2p5... is this tree with one host copy per timing set and the repeat-pair rule (`host_rotate_buffers:
# 2, repeat_pairs: 5`, session 25: bench/probes/stop_rule_causes.py). A run named kgather... is this
# tree with a kernel launch's spot sample copied by one gather launch instead of 8 driver calls
# (`kernel_spot_gather: true`, session 28: the copies made kernel trials host-bound, +0.3 ms a trial).
# A run named tcores... is this tree with REGRAPH_EXECUTOR_TIMING_CORES=$TCORES (2 by default; session
# 28: function trials on cores of their own, compiles on the rest; every other run of this tree has it 0).
# A run named tcg... is tcores with kernel_spot_gather; t1c... is tcores with one timing core; tng... is
# tcores without the kernel trials' launch gate (session 29). A run named prev... is an earlier commit's executor
# (.base/prev.tgz, below; session 30).
# Knobs: ORDER, AB_SECONDS, SCALE_SECONDS (0: no scaling step), STEADY_AFTER, SEED, DEADLINE_S (540),
# QUEUE_KIND: `long` (the default, above) or `first` (session 20: every task, one correct candidate and
# one failing one each, no hangs, so that nearly every verdict is its task's first evaluation, with the
# task's preparation, reference and naive baseline; both trees take the same arguments).
# Plumbing test on a CPU machine (host runtime: function tasks only, two fake GPUs for Ray):
#   NO_GPU_ENV=1 RUNTIME=host GPUS=2 LIMIT=2 AB_SECONDS=20 SCALE_SECONDS=20 STEADY_AFTER=10 CLIENTS=2 \
#     OUT=/tmp/s18_out bash bench/device/run_s18_ab.sh
set -uo pipefail
START=$(date +%s)
ROOT=$PWD
if [ -z "${NO_GPU_ENV:-}" ]; then
  # shellcheck source=bench/device/gpu_env.sh
  source bench/device/gpu_env.sh  # a no-op install when the command already sourced it
else
  OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; : > "$OUT/env.txt"
fi
RES=${RES:-/tmp/s18_ab}; rm -rf "$RES"; mkdir -p "$RES/ab" "$RES/scaling"
RUNTIME=${RUNTIME:-gpu}
export RAY_USAGE_STATS_ENABLED=0 REGRAPH_EXECUTOR_RUN_TIMEOUT_S=60 HF_HUB_OFFLINE=1
AB=${AB_SECONDS:-70}; SCALE=${SCALE_SECONDS:-70}; STEADY=${STEADY_AFTER:-30}; DEADLINE=${DEADLINE_S:-540}
CLIENTS=${CLIENTS:-16}
N=${GPUS:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)}
left() { echo $(( DEADLINE - ($(date +%s) - START) )); }
TASK_DIRS=(--tasks regraph_data/tasks --tasks regraph_data/kernel_tasks)
BASE_DIRS=(--tasks bench/tasks --tasks bench/kernel_tasks)
if [ "$RUNTIME" = host ]; then TASK_DIRS=(--tasks regraph_data/tasks); BASE_DIRS=(--tasks bench/tasks); fi
QUEUE=(--runtime "$RUNTIME" --single --clients "$CLIENTS" --per-task 30 --limit "${LIMIT:-8}" --hangs 3
  --seed "${SEED:-0}" --max-seconds "$AB" --steady-after "$STEADY")
if [ "${QUEUE_KIND:-long}" = first ]; then
  QUEUE=(--runtime "$RUNTIME" --single --clients "$CLIENTS" --per-task 1 --limit "${LIMIT:-1000}" --hangs 0
    --seed "${SEED:-0}" --max-seconds "$AB" --steady-after "$STEADY")
fi
SETTINGS='{"compile_workers": 12}'
BASE=/tmp/s18_base
if [ -f "$ROOT/.base/base.tgz" ]; then rm -rf "$BASE"; mkdir -p "$BASE"; tar -xzf "$ROOT/.base/base.tgz" -C "$BASE"; fi
# A run named prev... (session 30) is an earlier commit of this tree with its defaults, from .base/prev.tgz
# (`git archive <commit> -- executor | gzip -9 > .base/prev.tgz`): its executor package in place of this
# tree's, with this tree's bench (the same queue and probe), for a same-call A/B of one change.
PREV=/tmp/s18_prev
if [ -f "$ROOT/.base/prev.tgz" ]; then
  rm -rf "$PREV"; mkdir -p "$PREV"; tar -xzf "$ROOT/.base/prev.tgz" -C "$PREV"
  mkdir -p "$PREV/bench" && cp "$ROOT"/bench/*.py "$PREV/bench/" && cp -r "$ROOT/bench/probes" "$PREV/bench/"
  cp -r "$ROOT/regraph_data" "$PREV/"
fi
RAN=()
SCALED=()
pack() {
  {
    echo "# Session 18: issue 33's cost (this tree against 57d0025, GPU 0) and 1 vs 2 replicas ($(date -u +%FT%TZ))"
    echo; echo "A/B window ${AB} s, scaling window ${SCALE} s, steady after ${STEADY} s; $N GPUs, runtime $RUNTIME"; echo
    if [ ${#RAN[@]} -gt 0 ]; then
      echo "## Issue 33's cost: the \`${QUEUE_KIND:-long}\` queue on one GPU"; echo
      ( cd "$ROOT" && python3 -m bench.probes.throughput --compare "${RAN[@]}" --max-seconds "$AB" \
        --steady-after "$STEADY" --out "$RES/ab/compare.json" 2>&1 )
      echo
      echo "Per correct candidate finished after ${STEADY} s, mean seconds under the lock (n):"; echo
      ( python3 - "$STEADY" "${RAN[@]}" <<'PY' 2>&1
import json, statistics, sys
after = float(sys.argv[1])
keys = ("gpu_held", "correctness", "compare", "timing_lock_wait", "timing_trials", "last_check", "baseline_timing")
for kind in ("function", "kernel"):
    print(f"| {kind} | n | " + " | ".join(keys) + " | trials | robust CoV |")
    print("|---|---|" + "---|" * (len(keys) + 2))
    for arg in sys.argv[2:]:
        name, path = arg.split("=", 1)
        rs = [r for run in json.load(open(path))["runs"] for r in run["records"]
              if r["task_kind"] == kind and r["candidate"] == "correct" and r.get("trials")
              and r["finished_s"] >= after and "gpu_held" in r["seconds"]]
        if not rs:
            print(f"| {name} | 0 |" + " - |" * (len(keys) + 2)); continue
        cols = [statistics.fmean(r["seconds"].get(k, 0.0) for r in rs) for k in keys]
        print(f"| {name} | {len(rs)} | " + " | ".join(f"{c:.3f}" for c in cols)
              + f" | {statistics.fmean(r['trials'] for r in rs):.1f} | {statistics.median(r['robust_cov'] or 0 for r in rs):.3f} |")
    print()
PY
      )
    fi
    if [ ${#SCALED[@]} -gt 0 ]; then
      echo "## Issue 29: 1 vs 2 replicas, this tree (mixed queue at saturation)"; echo
      ( cd "$ROOT" && python3 - "$STEADY" "${SCALED[@]}" <<'PY' 2>&1
import json, sys
from bench.probes.throughput import render_time_table
runs = [run for path in sys.argv[2:] for run in json.loads(open(path).read()).get("runs", [])]
print("\n".join(render_time_table(runs)))
first = None
for run in runs:
    steady = run.get("steady") or {}
    rate = steady.get("per_hour")
    first = first or rate
    eff = f"{rate / (run['replicas'] * first):.0%}" if rate and first else "-"
    parts = {}
    for r in run["records"]:
        if r["task_kind"] == "function" and r["candidate"] == "correct" and "timing_trials" in r["seconds"]:
            for key in ("gpu_held", "timing_trials", "baseline_timing", "correctness", "timing_lock_wait", "last_check"):
                parts.setdefault(key, []).append(r["seconds"].get(key, 0.0))
    mean = {k: sum(v) / len(v) for k, v in parts.items()}
    timed = sum(1 for r in run["records"] if "baseline_timing" in r["seconds"])
    print(f"- {run['replicas']} replicas: {run['verdicts']} verdicts, {run['per_hour']}/h, after {sys.argv[1]} s "
          f"{rate}/h (efficiency {eff}); correct function candidates (n {len(parts.get('gpu_held', []))}) mean s: "
          + ", ".join(f"{k} {v:.3f}" for k, v in mean.items())
          + f"; baselines timed {timed}; lost {run['lost']}, retried {run['retried']}, outcomes {json.dumps(run['outcomes'])}")
PY
      )
      echo
    fi
    for f in "$RES"/ab/*.md "$RES"/scaling/*.md; do [ -f "$f" ] || continue; echo "## $(basename "$f" .md)"; head -16 "$f"; echo; done
    cat "$RES/notes.txt" 2>/dev/null
  } > "$OUT/summary.md"
  tar czf "$OUT/s18_ab.tar.gz" -C "$RES" ab
  [ ${#SCALED[@]} -gt 0 ] && tar czf "$OUT/s18_scaling.tar.gz" -C "$RES" scaling
  return 0
}
# 1. The A/B on GPU 0.
ab_run() {  # name, tree (new or base), this tree's evaluation options as JSON (default: none), timing cores (0)
  local name=$1 tree=$2 opts=${3:-"{}"} tcores=${4:-0}
  if [ "$(left)" -lt $(( AB + 40 )) ]; then echo "skipped $name: $(left) s left" | tee -a "$RES/notes.txt"; return; fi
  echo "== $name ($tree) at $(( $(date +%s) - START )) s"
  if [ "$tree" = prev ]; then
    [ -d "$PREV/executor" ] || { echo "no .base/prev.tgz: $name skipped" | tee -a "$RES/notes.txt"; return; }
    ( cd "$PREV" && CUDA_VISIBLE_DEVICES=0 PYTHONPATH=/tmp/site:$PREV REGRAPH_EXECUTOR_TIMING_CORES=$tcores timeout $(( AB + 60 )) \
      python3 -m bench.probes.throughput "${QUEUE[@]}" "${TASK_DIRS[@]}" --settings "$SETTINGS" --options "$opts" \
      --out "$RES/ab/$name.json" --md "$RES/ab/$name.md" > /dev/null 2> "$RES/ab/$name.log" )
  elif [ "$tree" = new ]; then
    ( cd "$ROOT" && CUDA_VISIBLE_DEVICES=0 REGRAPH_EXECUTOR_TIMING_CORES=$tcores timeout $(( AB + 60 )) python3 -m bench.probes.throughput "${QUEUE[@]}" \
      "${TASK_DIRS[@]}" --settings "$SETTINGS" --options "$opts" --out "$RES/ab/$name.json" --md "$RES/ab/$name.md" > /dev/null 2> "$RES/ab/$name.log" )
  else
    [ -d "$BASE/executor" ] || { echo "no .base/base.tgz: $name skipped" | tee -a "$RES/notes.txt"; return; }
    ( cd "$BASE" && CUDA_VISIBLE_DEVICES=0 PYTHONPATH=/tmp/site:$BASE timeout $(( AB + 60 )) python3 -m bench.throughput \
      "${QUEUE[@]}" "${BASE_DIRS[@]}" --settings "$SETTINGS" --out "$RES/ab/$name.json" --md "$RES/ab/$name.md" \
      > /dev/null 2> "$RES/ab/$name.log" )
  fi
  echo "rc $? after $(( $(date +%s) - START )) s" | tee -a "$RES/ab/$name.log"
  [ -f "$RES/ab/$name.json" ] && RAN+=("$name=$RES/ab/$name.json")
  pack
}
for name in ${ORDER:-new base new2}; do
  case $name in
    new*) ab_run "$name" new ;;
    sets2*) ab_run "$name" new '{"timing_sets": 2}' ;;
    kspots*) ab_run "$name" new '{"kernel_spot_checks": true}' ;;
    pairs*) ab_run "$name" new '{"repeat_pairs": 5}' ;;
    c2p5*) ab_run "$name" new '{"host_rotate_buffers": 2, "repeat_pairs": 5}' ;;
    kgather*) ab_run "$name" new '{"kernel_spot_gather": true}' ;;
    tng*) ab_run "$name" new '{"launch_gate": false}' "${TCORES:-2}" ;;
    tcg*) ab_run "$name" new '{"kernel_spot_gather": true}' "${TCORES:-2}" ;;
    t1c*) ab_run "$name" new '{}' 1 ;;
    tcores*) ab_run "$name" new '{}' "${TCORES:-2}" ;;
    base*) ab_run "$name" base ;;
    prev*) ab_run "$name" prev ;;
    *) echo "unknown run $name" | tee -a "$RES/notes.txt" ;;
  esac
done
# 2. 1 vs 2 replicas with this tree.
if [ "$SCALE" -le 0 ] || [ "$N" -lt 2 ]; then
  echo "scaling skipped: SCALE_SECONDS=$SCALE, $N GPUs" | tee -a "$RES/notes.txt"
else
  # What is left, shared by the two sizes (each its window plus ~30 s of start and stop), at most SCALE.
  fit=$(( ($(left) - 10) / 2 - 30 ))
  if [ "$fit" -lt "$SCALE" ]; then SCALE=$fit; fi
fi
if [ "$SCALE" -gt 0 ] && [ "$N" -ge 2 ] && [ "$SCALE" -lt 45 ]; then
  echo "scaling skipped: $(left) s left, a window of $SCALE s would be too short" | tee -a "$RES/notes.txt"
elif [ "$SCALE" -gt 0 ] && [ "$N" -ge 2 ]; then
  echo "scaling: ${SCALE}-s windows" | tee -a "$RES/notes.txt"
  ray start --head --port=6382 --num-gpus="$N" --include-dashboard=false --disable-usage-stats \
    --temp-dir=/tmp/rays18 > "$RES/scaling/ray.log" 2>&1 || echo "ray did not start" | tee -a "$RES/notes.txt"
  trap 'ray stop --force >/dev/null 2>&1; pack' EXIT
  for n in 1 2; do
    if [ "$(left)" -lt $(( SCALE + 25 )) ]; then echo "skipped $n replicas: $(left) s left" | tee -a "$RES/notes.txt"; continue; fi
    ( cd "$ROOT" && timeout $(( $(left) > 0 ? $(left) : 1 )) python3 -m bench.probes.throughput --runtime "$RUNTIME" \
      --ray 127.0.0.1:6382 --replicas "$n" "${TASK_DIRS[@]}" --limit "${SCALE_LIMIT:-1000}" --per-task 4 --hangs 3 \
      --clients "$CLIENTS" --max-seconds "$SCALE" --steady-after "$STEADY" --hard-stop \
      --out "$RES/scaling/queue_$n.json" --md "$RES/scaling/queue_$n.md" 2> "$RES/scaling/queue_$n.log" )
    echo "size $n: exit $? at $(( $(date +%s) - START )) s" | tee -a "$RES/scaling/steps.txt"
    [ -f "$RES/scaling/queue_$n.json" ] && SCALED+=("$RES/scaling/queue_$n.json")
    pack
  done
fi
echo "$(( $(date +%s) - START )) s in all" >> "$RES/notes.txt"
pack
cat "$OUT/summary.md"
