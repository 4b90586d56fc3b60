#!/usr/bin/env bash
# Issue 16: the two GPU tests that guard the executor's verdicts on adversarial candidates, run against a
# deliberately broken executor (a copy of the tree in /tmp, never this checkout), then against the real
# one. Each break must make its test fail; the real executor must pass both.
#   oom:    an out-of-memory death is reported as a crash (both places that name OUT_OF_MEMORY for a
#           killed or dying worker) -> test_adversarial_candidates_are_rejected[...huge_host_allocation]
#           must fail (it requires exactly out_of_memory).
#   stale:  the worker calls the candidate once more on the same inputs before each checked call (a
#           "warm-up" on the checked set), so a candidate that returns its previous call's result looks
#           right, AND the check of the timed calls' outputs (issue 33, after 57d0025) is taken out:
#           test_adversarial_candidates_are_rejected[...saxpy_other_stream] must fail, while its control
#           (the same code with the wait) still passes.
#   stale_only: the stale break alone. Since issue 33 the timed calls' outputs are checked too, and the
#           racy candidate is caught there (session 31, H200: both tests pass): a row that records that
#           the correctness check is no longer this case's only guard, not a break that must fail.
# Usage on the device, from the repository root: bash bench/device/faithfulness_breaks.sh (OUT set by run).
set -u
source bench/device/gpu_env.sh || exit 1
SUMMARY="$OUT/faithfulness_breaks.md"
PYTEST=(python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -m gpu tests/gpu/test_executor_gpu.py)
OOM_K="huge_host_allocation"
STALE_K="other_stream"
{
  echo "# Faithfulness breaks on the GPU ($(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"
  echo
  echo "Command: \`bash bench/device/faithfulness_breaks.sh\` at $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "| executor | tests (-k) | result | expected |"
  echo "|---|---|---|---|"
} > "$SUMMARY"

run_case() {  # $1 label, $2 tree, $3 -k expression, $4 expected
  local log="$OUT/$1.log"
  (cd "$2" && PYTHONPATH="/tmp/site:$2" timeout 300 "${PYTEST[@]}" -k "$3" -rA) > "$log" 2>&1
  local rc=$? line
  line=$(grep -E "passed|failed|error" "$log" | tail -1)
  echo "| $1 | \`$3\` | rc $rc: $line | $4 |" >> "$SUMMARY"
  grep -E "^(PASSED|FAILED|ERROR)|AssertionError|assert " "$log" | head -12 | sed 's/^/    /' >> "$SUMMARY"
}

broken_tree() {  # $1 name: a copy of the tree to break
  rm -rf "/tmp/$1" && mkdir -p "/tmp/$1" && cp -a executor tests search api graphdb bench regraph_cli pyproject.toml "/tmp/$1/" 2>/dev/null
  echo "/tmp/$1"
}

# oom break
T=$(broken_tree broken_oom)
python3 - "$T" <<'EOF'
import sys
from pathlib import Path
p = Path(sys.argv[1]) / "executor/sandbox.py"
s = p.read_text()
a = 'kind = ErrorKind.OUT_OF_MEMORY if "MemoryError" in tail or "std::bad_alloc" in tail else ErrorKind.CRASH'
b = "killed_for = ErrorKind.OUT_OF_MEMORY\n"
assert a in s and b in s, "break points moved"
s = s.replace(a, "kind = ErrorKind.CRASH  # BREAK").replace(b, "killed_for = ErrorKind.CRASH  # BREAK\n", 1)
p.write_text(s)
p = Path(sys.argv[1]) / "executor/worker/process.py"
s = p.read_text()
c = '_failure(ErrorKind.OUT_OF_MEMORY, f"host memory exhausted: {e}"'
assert c in s
p.write_text(s.replace(c, '_failure(ErrorKind.CRASH, f"host memory exhausted: {e}"'))
print("oom break applied")
EOF
run_case broken_oom "$T" "$OOM_K" "fails (not out_of_memory)"

# stale-result break: $1 the tree, $2 (any word) also take out the check of the timed calls' outputs
stale_break() {
python3 - "$@" <<'EOF'
import sys
from pathlib import Path
p = Path(sys.argv[1]) / "executor/worker/candidate.py"
s = p.read_text()
a = "self.check(inputs, candidate.run(inputs, uploaded, call), self.expected(index))"
b = 'again = candidate.run(self.sets[0], call="the call on input set 1 again")'
assert a in s and b in s, "break points moved"
s = s.replace(a, "candidate.run(inputs); " + a + "  # BREAK")
s = s.replace(b, "candidate.run(self.sets[0]); " + b + "  # BREAK")
if len(sys.argv) > 2:  # and the timed calls' outputs not checked
    c = "self.check_timed_calls(candidate, sources, last)"
    assert s.count(c) == 1, "break point moved"
    s = s.replace(c, "pass  # BREAK")
p.write_text(s)
print("stale break applied", sys.argv[2:])
EOF
}
T=$(broken_tree broken_stale_only); stale_break "$T"
run_case broken_stale_only "$T" "$STALE_K" "both pass (the timed calls' check catches it: a record, not a break)"
T=$(broken_tree broken_stale); stale_break "$T" timed
run_case broken_stale "$T" "$STALE_K" "the adversarial case fails (passes as correct); the control passes"

# the real executor
run_case real "$PWD" "$OOM_K or $STALE_K" "all pass"
cat "$SUMMARY"
