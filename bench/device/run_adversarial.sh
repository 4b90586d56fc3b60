#!/usr/bin/env bash
# The hack corpus of issue 33 on a lent device, in one call (~6-9 min): every labelled case of
# tests/gpu/adversarial/ (tests/gpu/test_adversarial_corpus.py, with the persisting-L2 reset and the
# value-memo timing check), then the existing GPU tests (honest candidates must still pass), then the
# executor benchmark's honest candidates of every task (no honest candidate may become `implausible`).
# Carry: .whl (as run_executor_gpu.sh). Writes to $OUT: env.txt, corpus.jsonl, corpus.md, corpus.log,
# gpu_tests.log, executor_bench.{json,md,log}. Knobs: CORPUS_TIMEOUT (s, 300), TESTS_TIMEOUT (s, 200),
# BENCH_TIMEOUT (s, 240), BENCH_LIMIT (tasks per directory, 40), BENCH_TASKS (--tasks options), SKIP_TESTS=1,
# SKIP_BENCH=1, SKIP_CORPUS=1.
set -uo pipefail
# shellcheck source=bench/device/gpu_env.sh
source bench/device/gpu_env.sh
if [ -z "${SKIP_CORPUS:-}" ]; then
rm -f "$OUT/corpus.jsonl"
REGRAPH_ADVERSARIAL_OUT="$OUT/corpus.jsonl" timeout "${CORPUS_TIMEOUT:-300}" python3 -m pytest --noconftest -o addopts="" \
  -p no:cacheprovider -q -rA -m gpu tests/gpu/test_adversarial_corpus.py > "$OUT/corpus.log" 2>&1
tail -8 "$OUT/corpus.log"
python3 - "$OUT/corpus.jsonl" > "$OUT/corpus.md" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])] if len(sys.argv) > 1 else []
print("| case | expected | verdict | as labelled | median ms | floor ms (path) | speedup |")
print("| --- | --- | --- | --- | --- | --- | --- |")
ok = 0
for r in rows:
    good = r["got"] in r["expect"].split("|")
    ok += good
    floor = "" if r["floor_ms"] is None else f"{r['floor_ms']:.4g} ({r['floor_path']})"
    median = "" if r["median_ms"] is None else f"{r['median_ms']:.4g}"
    speedup = "" if r["speedup"] is None else f"{r['speedup']:.3g}"
    print(f"| {r['file']} | {r['expect']} | {r['got']} | {'yes' if good else '**NO**'} | {median} | {floor} | {speedup} |")
print(f"\n{ok} of {len(rows)} verdicts as labelled")
PY
cat "$OUT/corpus.md"
fi
if [ -z "${SKIP_TESTS:-}" ]; then
  timeout "${TESTS_TIMEOUT:-200}" python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA -m gpu \
    tests/gpu/test_executor_gpu.py tests/gpu/test_devcompare_gpu.py > "$OUT/gpu_tests.log" 2>&1
  tail -6 "$OUT/gpu_tests.log"
fi
if [ -z "${SKIP_BENCH:-}" ]; then
  timeout "${BENCH_TIMEOUT:-240}" python3 -m bench.probes.executor_bench --runtime gpu ${BENCH_TASKS:---tasks regraph_data/kernel_tasks --tasks regraph_data/tasks} \
    --limit "${BENCH_LIMIT:-40}" --evals 1 --gap 0 --cov-tasks 0 --cov-repeats 0 --load-inline 0 \
    --out "$OUT/executor_bench.json" --md "$OUT/executor_bench.md" 2> "$OUT/executor_bench.log"
  python3 - "$OUT/executor_bench.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1])).get("rows", [])
# A row's verdict is its first evaluation's (and its steady one's, when there is one).
runs = [(r.get("task"), run) for r in rows for run in [r.get("first"), *(r.get("steady") or [])] if run]
bad = [(task, run.get("error"), (run.get("message") or "")[:160]) for task, run in runs if not run.get("passed")]
rows = runs
print(f"honest benchmark candidates: {len(rows) - len(bad)} of {len(rows)} passed")
for b in bad:
    print("  not passed:", *b)
PY
fi
