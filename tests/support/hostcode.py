"""Host-code candidates for the worker tests of the ``host`` runtime: C++ sources compiled into shared
libraries with the system's g++ (the worker loads them and calls their entry through ctypes, as it
does a GPU function task's library)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from executor.protocol import EvaluationOptions

# Few sets and trials: two test-size sets, one timing-size set, the repeat of the first (four
# correctness calls), one warm-up call or more, three to five timed calls.
FAST = EvaluationOptions(
    correctness_sets=2,
    timing_size_checks=1,
    warmup=1,
    min_trials=3,
    max_trials=5,
    min_timing_ms=0,
    rotate_buffers=2,
    reference_repeats=1,
    baseline=False,
)


def build_host_candidates(out: Path, sources: dict[str, str]) -> dict[str, str]:
    """Compile each named C++ source in ``sources`` into ``out/NAME.so``; the libraries' paths by name."""
    built = {}
    for name, source in sources.items():
        src, lib = out / f"{name}.cpp", out / f"{name}.so"
        src.write_text(source)
        subprocess.run(["g++", "-O1", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
        built[name] = str(lib)
    return built
