#!/usr/bin/env bash
# One device call that checks a tree's verdicts on a GPU (~9 min): the GPU tests, the hack corpus
# (tests/gpu/adversarial/), the executor benchmark's honest candidates of every task (none may be
# refused by the timing checks) and ParEval's kernel check (a ParEval checkout carried as .pareval).
# Each step gets what is left of DEADLINE_S (default 560 s from the start), and everything is packed
# into $OUT/checks.tgz (a call returns at most 8 files). Carry: .whlgpu (renamed .whl here), .pareval.
# Knobs: SKIP_GPU_TESTS=1, and run_adversarial.sh's (SKIP_CORPUS=1, BENCH_TASKS, BENCH_TIMEOUT, ...).
set -u
S=$(date +%s)
left() { echo $(( ${DEADLINE_S:-560} - $(date +%s) + S )); }
if [ -d .whlgpu ]; then rm -rf .whl; mv .whlgpu .whl; fi
# shellcheck source=bench/device/gpu_env.sh
source bench/device/gpu_env.sh > /dev/null || exit 1
R=$OUT/checks; mkdir -p "$R"; cp "$OUT/env.txt" "$R/"
[ -z "${SKIP_GPU_TESTS:-}" ] && timeout "${TESTS_TIMEOUT:-220}" python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA -m gpu tests/gpu \
  --ignore=tests/gpu/test_adversarial_corpus.py > "$R/gpu_tests.log" 2>&1
echo "gpu tests rc $? at $(( $(date +%s) - S )) s"; grep -E "^(FAILED|ERROR)|passed|failed" "$R/gpu_tests.log" | tail -8
CORPUS_TIMEOUT=${CORPUS_TIMEOUT:-150} BENCH_TIMEOUT=${BENCH_TIMEOUT:-110} SKIP_TESTS=1 OUT=$R \
  bash bench/device/run_adversarial.sh > "$R/adversarial.out" 2>&1
echo "corpus and bench at $(( $(date +%s) - S )) s"; grep -E "as labelled|NO\*\*|honest benchmark|not passed" "$R/adversarial.out" | head -20
if [ -d .pareval ] && [ "$(left)" -gt 60 ]; then
  PAREVAL_TIMEOUT=$(( $(left) - 25 )) OUT=$R timeout $(( $(left) - 10 )) bash bench/device/run_pareval_check.sh > "$R/pareval.out" 2>&1
  echo "pareval at $(( $(date +%s) - S )) s"; tail -4 "$R/pareval.out"
fi
tar czf "$OUT/checks.tgz" -C "$OUT" checks && rm -rf "$R"
