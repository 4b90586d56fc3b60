#!/usr/bin/env bash
# Makes the Ray wheels that a device call can carry: Ray's cp312 wheel is 79 MB, over the 64 MiB that a
# call carries with the working tree, so it is repacked without what the executor fleet never loads
# (the Java workers' jars, the dashboard's web build, Serve, RLlib, Data, Train, Tune, LLM): about 44 MB.
# Its dependencies that the device's Python lacks are fetched next to it. Run here (not on the device);
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
mkdir "$work/unpacked" && (cd "$work/unpacked" && python3 -m zipfile -e "$work"/ray-*.whl .)
(cd "$work/unpacked" && rm -rf ray/jars ray/dashboard/client/build ray/serve ray/rllib ray/data ray/train \
  ray/tune ray/llm && python3 -m zipfile -c "$DIR/$(basename "$work"/ray-*.whl)" ./*)
get "$DIR" msgpack jsonschema jsonschema-specifications referencing rpds-py attrs protobuf requests urllib3 \
  charset-normalizer
ls -l "$DIR"
