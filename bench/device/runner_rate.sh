#!/usr/bin/env bash
# One device call: what the candidate process (the runner, REGRAPH_EXECUTOR_CANDIDATE_PROCESS=1) costs
# a GPU host's evaluation rate and its function tasks' timings, runner off against on, on the same
# function tasks (bench/probes/runner_rate.py: two executor services side by side, ABBA blocks, a
# sequential and a concurrent regime, fresh candidates). Everything fits DEADLINE_S (default 520 s from
# the start) with the wheels' install; the JSON is rewritten after every verdict and the tables after
# every block, so a call cut short keeps what it did.
# Carry: .whlgpu (renamed .whl here; the pycuda wheel in it saves the build). Knobs: TASKS (comma
# separated function tasks; default the probe's 8), CONCURRENCY (4), PER_VISIT (2), SEQ_SHARE (0.5),
# TIMING_CORES (default automatic: 2 on 16 CPUs, set the same in both services), RUNTIME (gpu; host
# runs it on a machine without a GPU, no wheels installed, for a smoke test), OPTIONS (EvaluationOptions
# as JSON; default {"baseline": false}, as bench.probes.executor_bench: the candidate is the naive code).
# Out: $OUT/runner_rate.md, $OUT/runner_rate.json, $OUT/runner_rate_logs.tgz (both services' logs),
# $OUT/env.txt; the tables are printed at the end.
set -u
S=$(date +%s)
DEADLINE_S=${DEADLINE_S:-520}
RUNTIME=${RUNTIME:-gpu}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if [ "$RUNTIME" = gpu ]; then
  if [ -d .whlgpu ]; then rm -rf .whl; mv .whlgpu .whl; fi
  # shellcheck source=bench/device/gpu_env.sh
  source bench/device/gpu_env.sh > "$OUT/gpu_env.log" 2>&1 || { tail -20 "$OUT/gpu_env.log"; exit 1; }
  tail -3 "$OUT/gpu_env.log"
else
  export PYTHONUNBUFFERED=1
  { date -u; nproc; } > "$OUT/env.txt"
fi
LOGS=/tmp/runner_rate_logs; rm -rf "$LOGS"; mkdir -p "$LOGS"
# The probe's own budget ends 15 s before the deadline (the packing below); timeout is the last resort.
BUDGET=$(( DEADLINE_S - ($(date +%s) - S) - 15 ))
echo "setup took $(( $(date +%s) - S )) s; the probe gets $BUDGET s"
ARGS=(--runtime "$RUNTIME" --budget-s "$BUDGET" --concurrency "${CONCURRENCY:-4}" --per-visit "${PER_VISIT:-2}"
      --seq-share "${SEQ_SHARE:-0.5}" --out "$OUT/runner_rate.json" --md "$OUT/runner_rate.md" --logs "$LOGS")
[ -n "${TASKS:-}" ] && ARGS+=(--tasks "$TASKS")
[ -n "${TIMING_CORES:-}" ] && ARGS+=(--timing-cores "$TIMING_CORES")
[ -n "${OPTIONS:-}" ] && ARGS+=(--options "$OPTIONS")
timeout --kill-after=40 $(( BUDGET + 5 )) python3 -m bench.probes.runner_rate "${ARGS[@]}" > "$LOGS/probe.out" 2>&1
echo "probe rc $? at $(( $(date +%s) - S )) s"
# The probe stops its two services itself (also on SIGTERM); killed outright, it leaves them: end their sessions.
while read -r pid; do
  kill -KILL -- "-$pid" 2>/dev/null && echo "killed service session $pid"
done < <(cat "$LOGS/service_pids" 2>/dev/null)
grep -E "^\[" "$LOGS/probe.out" | tail -40
if [ ! -s "$OUT/runner_rate.md" ] || grep -q '"partial": true' "$OUT/runner_rate.json" 2>/dev/null; then
  echo "(partial: tables rendered from the JSON)"
  python3 -m bench.probes.runner_rate --render "$OUT/runner_rate.json" --md "$OUT/runner_rate.md" > /dev/null 2>&1
  tail -30 "$LOGS/probe.out"
fi
tar czf "$OUT/runner_rate_logs.tgz" -C "$(dirname "$LOGS")" "$(basename "$LOGS")" 2>/dev/null
cat "$OUT/runner_rate.md"
# The headline again at the very end (a device call's output keeps its last 12,000 characters).
echo; echo "== summary"
grep -E "^\| regime \| (mode|rate)|^\| (seq|conc) \| (off|on|[0-9.]+|-) \||all tasks|runtime-stage verdicts|Runner processes|^## Verdicts" \
  "$OUT/runner_rate.md"
echo "total $(( $(date +%s) - S )) s"
