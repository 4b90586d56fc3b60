#!/usr/bin/env bash
# Session 32: evaluations per hour and the GPU lock's held share for this tree on one H200, within ~150 s
# on a warm machine (the wheels installed by an earlier call; a cold one adds the install, and pycuda's
# build when .whlgpu carries only its sdist), for the lead to A/B trees one call each (or both in one
# call, below). It runs run_s18_ab.sh's `long` queue (8 function + 8 kernel tasks x 30 correct
# candidates, failing ones and 3 hangs; 12 compile workers, 16 clients, seed 0) for AB_SECONDS (100) and
# then bench/device/lock_share.py on the records: evals/h in the window and after 40 s, the lock held
# (candidates' turns; with the naive baselines' turns), and per correct function candidate how many had
# their turn released before the host checks or refused (by the evaluator's hold, session 32's
# `release_hold_wait`, or by the worker's screen), with each group's time under the lock.
# Carry [".whlgpu"] (as in session 31: pydantic & co wheels and pycuda's wheel or sdist; renamed .whl here).
# Run (kind nvidia-h200, timeout_s 200): bash bench/device/run_lock_share.sh
# Both trees in one call (~2 x 75 s with AB_SECONDS=60): carry also .base holding prev.tgz, made here first
#   rm -rf .base && mkdir .base && git archive <other commit> -- executor | gzip -9 > .base/prev.tgz
#   grep -qx '/.base/' .git/info/exclude || echo /.base/ >> .git/info/exclude
# then: ORDER="new prev" AB_SECONDS=60 BUDGET_S=230 bash bench/device/run_lock_share.sh (timeout_s 260).
# Budget: run_s18_ab.sh starts a run only with AB + 40 s left, and a run of the long queue took AB + 12 s
# (session 31), AB + 60 at most (its timeout); so the second run starts when the setup (8 s warm, ~11 s
# fresh, more with cold caches) and the first run leave 100 s of 230: up to ~55 s of setup, and the call
# ends by BUDGET_S + 20 + the table. A run skipped for time is named under the table (its row says "not
# run"), never silently missing (review 33 F5).
# Out (6 files, 7 with a pycuda wheel built from its sdist; the return limit is 8): $OUT/lock_share.md
# (the table, and the runs' notes), $OUT/ab/summary.md and $OUT/ab/s18_ab.tar.gz (every run's records),
# $OUT/steps.txt, $OUT/env.txt, $OUT/logs.tar.gz (ab.out, gpu_env.out, pycuda_build.log).
# Knobs: ORDER (new), AB_SECONDS (100), STEADY_AFTER (40), BUDGET_S (170).
# Smoke run of the plumbing on a CPU machine (host runtime, function tasks only):
#   NO_GPU_ENV=1 RUNTIME=host GPUS=1 LIMIT=2 CLIENTS=2 AB_SECONDS=30 STEADY_AFTER=10 OUT=/tmp/ls_out \
#     bash bench/device/run_lock_share.sh
set -uo pipefail
export BUDGET_S=${BUDGET_S:-170}
if [ -z "${NO_GPU_ENV:-}" ]; then
  # shellcheck source=bench/device/budget_env.sh
  source bench/device/budget_env.sh
else
  S=$(date +%s); R=${OUT:-/tmp/out}; mkdir -p "$R"
  left() { echo $(( BUDGET_S - ($(date +%s) - S) )); }
  step() { echo "$(date -u +%T) $1 ($(left) s left)" | tee -a "$R/steps.txt"; }
fi
AB=${AB_SECONDS:-100}; STEADY=${STEADY_AFTER:-40}
step "queue ($AB s each: ${ORDER:-new})"
NO_GPU_ENV=1 OUT=$R/ab RES=/tmp/lock_share QUEUE_KIND=long ORDER="${ORDER:-new}" AB_SECONDS=$AB \
  STEADY_AFTER=$STEADY SCALE_SECONDS=0 DEADLINE_S=$(left) bash bench/device/run_s18_ab.sh > "$R/ab.out" 2>&1
step "table"
runs=()
for name in ${ORDER:-new}; do runs+=("$name=/tmp/lock_share/ab/$name.json"); done
{
  echo "# Lock share ($(date -u +%FT%TZ)): the long queue, ${CLIENTS:-16} clients, window $AB s"; echo
  python3 bench/device/lock_share.py --after "$STEADY" --window "$AB" "${runs[@]}"
  if [ -s /tmp/lock_share/notes.txt ]; then
    echo; echo "Notes of the runs (run_s18_ab.sh; a run skipped for time needs AB + 40 s left at its start):"
    sed 's/^/- /' /tmp/lock_share/notes.txt
  fi
} > "$R/lock_share.md" 2>&1
cat "$R/lock_share.md"
step "end"
# Fewer files back (review 33 F6): the empty env.txt of run_s18_ab's NO_GPU_ENV branch goes, the logs
# go into one tarball.
rm -f "$R/ab/env.txt"
logs=()
for f in ab.out gpu_env.out pycuda_build.log; do [ -f "$R/$f" ] && logs+=("$f"); done
if [ ${#logs[@]} -gt 0 ] && tar czf "$R/logs.tar.gz" -C "$R" "${logs[@]}"; then
  for f in "${logs[@]}"; do rm -f "$R/$f"; done
fi
