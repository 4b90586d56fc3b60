#!/usr/bin/env bash
# Session 25 (issue 33's cost with two timing sets by default), ONE call on nvidia-h200 of <= 540 s.
# Three steps, in this order, each given what is left of BUDGET_S (525) and noted in $OUT/steps.txt:
#   1. the A/B of this tree against 57d0025 on the `long` queue (bench/device/run_s18_ab.sh, QUEUE_KIND
#      long, ORDER "new base", 100-s windows, rate after 40 s; ~235 s): $OUT/ab/summary.md, s18_ab.tar.gz;
#   2. the GPU tests (~105 s; verbose, so that a run cut short still shows each test's result):
#      $OUT/gpu_tests.log;
#   3. the hack corpus with this tree's defaults (bench/device/run_adversarial.sh, ~115 s):
#      $OUT/corpus/corpus.md, $OUT/corpus.out.
# Carry [".whlgpu", ".base"]; .base holds ONLY base.tgz, made here before the call (as for run_s18_ab.sh):
#   rm -rf .base && mkdir .base && git archive 57d0025 -- executor bench/__init__.py bench/throughput.py \
#     bench/executor_bench.py bench/tasks bench/kernel_tasks | gzip -9 > .base/base.tgz
#   grep -qx '/.base/' .git/info/exclude || echo /.base/ >> .git/info/exclude
# Run (kind nvidia-h200, timeout_s 540): bash bench/device/run_s25_cost.sh
# Then, on the host, from the files that came back:
#   mkdir -p /tmp/s25 && tar -xzf ab/s18_ab.tar.gz -C /tmp/s25
#   python -m bench.probes.issue33_cost new=/tmp/s25/ab/new.json base=/tmp/s25/ab/base.json
set -uo pipefail
# shellcheck source=bench/device/budget_env.sh
source bench/device/budget_env.sh
step "ab"
# two runs of 100 s, each started only with 140 s left of its deadline (run_s18_ab.sh's ab_run)
NO_GPU_ENV=1 OUT=$R/ab QUEUE_KIND=long ORDER="new base" AB_SECONDS=100 STEADY_AFTER=40 SCALE_SECONDS=0 \
  DEADLINE_S=$(( $(left) - 200 )) bash bench/device/run_s18_ab.sh > "$R/ab.out" 2>&1
step "gpu tests"
timeout $(( $(left) - 125 )) python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -v -rA -m gpu \
  tests/gpu --ignore=tests/gpu/test_adversarial_corpus.py > "$R/gpu_tests.log" 2>&1
echo "rc $?" >> "$R/gpu_tests.log"
step "corpus"
SKIP_TESTS=1 SKIP_BENCH=1 CORPUS_TIMEOUT=$(( $(left) - 5 )) OUT=$R/corpus bash bench/device/run_adversarial.sh \
  > "$R/corpus.out" 2>&1
step "end"
tail -3 "$R/gpu_tests.log"
tail -2 "$R/corpus.out"
grep -A4 "^| config" "$R/ab/summary.md" 2>/dev/null
