#!/usr/bin/env bash
# The throughput queue (run_throughput_gpu.sh's configurations) on the working tree ("new") and on a
# baseline tree ("base") in turn, on the same machine in one call: machine starts differ by ~30 % in
# evaluations/hour, so only a comparison on one machine says whether a change helps.
# The baseline is made here before the call and carried (an ignored directory, 2.4 MB), e.g. for HEAD:
#   rm -rf .base && mkdir .base && git archive HEAD -- executor bench/__init__.py bench/probes/__init__.py \
#     bench/probes/executor_bench.py regraph_data bench/device | tar -x -C .base
#   cp bench/probes/throughput.py .base/bench/probes/  # the same measurement on both
#   (and run_throughput_gpu.sh into .base/bench/device/), and `echo /.base/ >> .git/info/exclude`
# Carry: .whl and .base. Knobs: AB_CONFIGS (default "profile"), AB_ROUNDS (default "a": one round;
# "a b": two, interleaved new, base, new, base), BENCH_SECONDS (60), AB_TREES (default "new base": the
# trees run in turn; "new" is the working tree, any other name N the carried directory .N, made as
# .base is). Each run's table and JSON come back in $OUT/<tree>_<config><round>/throughput_results.tar.gz;
# the first line of each table is printed.
set -u
export DEADLINE_S=600 BENCH_SECONDS=${BENCH_SECONDS:-60}
ROOT=$PWD; TOP=$OUT
ab() {  # which (new, or the name of a carried tree), config, round
  if [ "$1" != new ]; then cd "$ROOT/.$1" && ln -sfn ../.whl .whl; else cd "$ROOT"; fi
  OUT=$TOP/$1_$2$3 RES=/tmp/res_$1_$2$3 CONFIGS=$2 bash bench/device/run_throughput_gpu.sh 2>&1 \
    | grep -E "^\| 1 \| [0-9]" | head -1 | sed "s/^/$1 $2$3: /"
  rm -f "$TOP/$1_$2$3/env.txt" "$TOP/$1_$2$3/summary.md"  # the device returns few files
  cd "$ROOT"
}
for round in ${AB_ROUNDS:-a}; do
  for config in ${AB_CONFIGS:-profile}; do
    for tree in ${AB_TREES:-new base}; do ab "$tree" "$config" "$round"; done
  done
done
