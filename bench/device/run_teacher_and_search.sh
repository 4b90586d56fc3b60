#!/usr/bin/env bash
# One device call: the executor on the GPU, then (1) the teacher trajectories of the chosen tasks
# evaluated step by step (regraph bench cudaeval --teacher) and (2) a replayed MCGS search on three
# held-out tasks (regraph optimize). Everything lands in $OUT/run.tgz plus the two summaries.
# Carry: .whl (wheels incl. the pycuda wheel built on the device). Env: TASKS (default eval),
# TEACHER_LIMIT_S (default 280), SEARCH_TASKS (three ids), SEARCH_BUDGET (default 10).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; RUN=/tmp/run; mkdir -p "$RUN"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
{ date -u; nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader; nvcc --version | tail -1; } | tee "$RUN/env.txt"
python3 -c "from executor.server import serve; from executor.settings import ExecutorSettings; serve(ExecutorSettings(host='127.0.0.1', port=8081))" > "$RUN/executor.log" 2>&1 &
for _ in $(seq 60); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8081/healthz')" 2>/dev/null && break; sleep 1; done
curl -s http://127.0.0.1:8081/v1/device | tee "$RUN/device.json"; echo
# A partial run carried in .devrun/<name> resumes where it stopped.
teacher() {  # name, tasks, time limit
  [ -d ".devrun/$1" ] && cp -r ".devrun/$1" "$RUN/$1"
  timeout $(( $3 + 150 )) python3 -m regraph_cli bench cudaeval --teacher --tasks "$2" \
    --executor-url http://127.0.0.1:8081 --out "$RUN/$1" --time-limit "$3" > "$RUN/$1.log" 2>&1
  tail -4 "$RUN/$1.log"
}
teacher teacher "${TASKS:-eval}" "${TEACHER_LIMIT_S:-280}"
[ -n "${BUILD_TASKS:-}" ] && teacher teacher_build "$BUILD_TASKS" "${BUILD_LIMIT_S:-200}"
for task in ${SEARCH_TASKS:-}; do
  timeout ${SEARCH_TIMEOUT_S:-150} python3 -m regraph_cli optimize "regraph_data/tasks/$task/reference.cpp" --task "regraph_data/tasks/$task" \
    --executor-url http://127.0.0.1:8081 --replay "bench/trajectories/$task.jsonl" --graph trajectories \
    --method regraph-mcgs --budget "${SEARCH_BUDGET:-10}" --verification verified --out "$RUN/optimize" \
    > "$RUN/optimize_$task.log" 2>&1
  echo "== optimize $task (exit $?)"; tail -6 "$RUN/optimize_$task.log"
done
cp "$RUN/teacher/report.md" "$OUT/teacher_report.md" 2>/dev/null
cp "$RUN/teacher_build/report.md" "$OUT/teacher_build_report.md" 2>/dev/null
tar czf "$OUT/run.tgz" -C "$RUN" .
