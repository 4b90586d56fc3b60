#!/usr/bin/env bash
# Makes the Ray wheels that a device call can carry: Ray's cp312 wheel is 79 MB, over the 64 MiB that a
# call carries with the working tree, so it is repacked without what the executor fleet never loads
# (the Java workers' jars, the dashboard's web build, Serve, RLlib, Data, Train, Tune, LLM): about 29 MB.
# Run here (not on the device);
# then carry the folder and set RAY_WHEELS to it for bench/device/run_fleet_gpu.sh or
# run_fleet_multi_gpu.sh. Usage: bash bench/device/strip_ray_wheel.sh [DIR (default .whlray)]
set -euo pipefail
DIR=${1:-.whlray}
VERSION=${RAY_VERSION:-2.60.0}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
get() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d "$@"
}
get "$work" "ray==$VERSION"
# Repacked entry by entry: the modes (the GCS server's and raylet's execute bits) are kept, and LZMA
# (which pip's zipfile reads) instead of deflate takes the wheel from ~40 to ~29 MB.
python3 - "$work"/ray-*.whl "$DIR" <<'PY'
import sys, zipfile
from pathlib import Path
source, out = Path(sys.argv[1]), Path(sys.argv[2])
left_out = ("ray/jars/", "ray/dashboard/client/build/", "ray/serve/", "ray/rllib/", "ray/data/",
            "ray/train/", "ray/tune/", "ray/llm/")
with zipfile.ZipFile(source) as zin, zipfile.ZipFile(out / source.name, "w") as zout:
    for info in zin.infolist():
        if not info.filename.startswith(left_out):
            zout.writestr(info, zin.read(info), compress_type=zipfile.ZIP_LZMA)
PY
# Its dependencies that the device image lacks (msgpack, attrs, protobuf, requests... are there) come with
# bench/device/fetch_wheels.sh (jsonschema and its own).
ls -l "$DIR"
