#!/usr/bin/env bash
# Issue 16's GPU check of the ParEval conversion: our 27 kernels and 27 empty kernels through a GPU
# executor (what `regraph bench pareval --check-kernels` does, without the CLI's other dependencies).
# Carry .whl and a ParEval checkout as .pareval (ignored; never committed). Writes $OUT/pareval_check/.
set -u
source bench/device/gpu_env.sh || exit 1
export REGRAPH_EXECUTOR_PORT=8093 REGRAPH_EXECUTOR_RUNTIME=gpu
python3 -m executor.server > "$OUT/pareval_executor.log" 2>&1 &
SERVER=$!
for _ in $(seq 120); do curl -sf localhost:8093/readyz > /dev/null && break; sleep 1; done
mkdir -p "$OUT/pareval_check"
timeout "${PAREVAL_TIMEOUT:-400}" python3 - <<'PY'
import os
from pathlib import Path

from bench.pareval import convert_pareval
from bench.pareval_check import check_kernels, write_report
from executor.client import ExecutorClient

out = Path(os.environ["OUT"]) / "pareval_check"
conversion = convert_pareval(Path(".pareval"), Path("/tmp/pareval_tasks"))
url = "http://127.0.0.1:8093"
command = "bench/device/run_pareval_check.sh (check_kernels over bench/pareval_kernels)"
with ExecutorClient(url) as client:
    report = check_kernels(Path("/tmp/pareval_tasks"), conversion, Path("bench/pareval_kernels"), client, url, command)
write_report(report, out)
print(report.summary())
PY
echo "rc $?"
kill "$SERVER"; wait "$SERVER" 2> /dev/null
