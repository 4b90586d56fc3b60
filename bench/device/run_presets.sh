#!/usr/bin/env bash
# One device call (<= 8 minutes): the replay benchmark with both MCGS presets, "ours" (the default) and
# "paper" (search.mcgs.PAPER_PRESET), on the same held-out tasks, budget and seeds, then one report
# comparing them. The executor runs on the GPU as in run_teacher_and_search.sh; the model is the replay
# of the teacher trajectories (--model teacher), the graph the in-memory one of the building tasks.
# Carry: .whl (wheels incl. the pycuda wheel), and .devrun/presets_<preset>/ to resume a partial run.
# Env: TASKS (comma-separated held-out ids; default two per tier), BUDGET (evaluations per search, 8),
# SAMPLES (seeds per task, 1), LIMIT_S (seconds per preset before no new task starts, 200),
# PRESETS ("ours paper"), PORT (8081).
# Writes $OUT/presets_<preset>_report.md, $OUT/presets_comparison.md and $OUT/run.tgz (everything).
# Without a GPU the executor is compile-only: every candidate "fails" (not verified), so both presets
# only expand the initial node; that checks the plumbing, not the presets.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; RUN=${RUN:-/tmp/run}; mkdir -p "$RUN"
PORT=${PORT:-8081}; URL=http://127.0.0.1:$PORT
TASKS=${TASKS:-black_scholes_f32,fir_decimate_f32,argmax_f32,ell_spmv_f32,jacobi3d_7pt_f32,csr_spmm_f32}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
if [ -d .whl ]; then
  export PYTHONPATH=/tmp/site:$PWD
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
{ date -u; nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>/dev/null; nvcc --version | tail -1; } | tee "$RUN/env.txt"
python3 -c "from executor.server import serve; from executor.settings import ExecutorSettings; serve(ExecutorSettings(host='127.0.0.1', port=$PORT))" > "$RUN/executor.log" 2>&1 &
EXECUTOR=$!
trap 'kill $EXECUTOR 2>/dev/null' EXIT
for _ in $(seq 60); do python3 -c "import urllib.request; urllib.request.urlopen('$URL/healthz')" 2>/dev/null && break; sleep 1; done
curl -s "$URL/v1/device" | tee "$RUN/device.json"; echo
results=()
for preset in ${PRESETS:-ours paper}; do
  name=presets_$preset
  [ -d ".devrun/$name" ] && [ ! -d "$RUN/$name" ] && cp -r ".devrun/$name" "$RUN/$name"
  timeout $(( ${LIMIT_S:-200} + 150 )) python3 -m regraph_cli bench cudaeval --executor-url "$URL" \
    --method regraph-mcgs --model teacher --tasks "$TASKS" --samples "${SAMPLES:-1}" --budget "${BUDGET:-8}" \
    --search-option "preset=$preset" --time-limit "${LIMIT_S:-200}" --out "$RUN/$name" > "$RUN/$name.log" 2>&1
  echo "== preset $preset (exit $?)"; tail -3 "$RUN/$name.log"
  cp "$RUN/$name/report.md" "$OUT/${name}_report.md" 2>/dev/null && results+=("$RUN/$name/result.json")
done
if [ ${#results[@]} -gt 1 ]; then
  python3 -m regraph_cli bench report "${results[@]}" --out "$RUN/presets_comparison" > "$RUN/comparison.log" 2>&1
  cp "$RUN/presets_comparison/report.md" "$OUT/presets_comparison.md" 2>/dev/null
  sed -n '/^| run |/,/^$/p' "$RUN/presets_comparison/report.md"
fi
tar czf "$OUT/run.tgz" -C "$RUN" .
