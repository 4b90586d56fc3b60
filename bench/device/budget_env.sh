# Sourced by the one-call device scripts that share a budget between their steps (run_s25_cost.sh,
# run_s26_trials.sh): BUDGET (BUDGET_S, 525 s), left() (seconds of it left), OUT and R (the output
# folder), step NAME (a line in $R/steps.txt), the carried .whlgpu used as .whl, and
# bench/device/gpu_env.sh sourced (its output in $R/gpu_env.out; the script stops when it fails).
S=$(date +%s)
BUDGET=${BUDGET_S:-525}
left() { echo $(( BUDGET - ($(date +%s) - S) )); }
R=${OUT:-/tmp/out}; export OUT=$R
mkdir -p "$R"
step() { echo "$(date -u +%T) $1 ($(left) s left)" | tee -a "$R/steps.txt"; }
if [ -d .whlgpu ]; then rm -rf .whl; mv .whlgpu .whl; fi
# shellcheck source=bench/device/gpu_env.sh
source bench/device/gpu_env.sh > "$R/gpu_env.out" 2>&1 || { tail -20 "$R/gpu_env.out"; exit 1; }
