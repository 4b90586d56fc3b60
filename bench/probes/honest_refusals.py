"""How often the executor's timing checks refuse an honest function candidate on this host.

    python -m bench.probes.honest_refusals --repeats 5 --parallel 3 --md /tmp/honest.md

Session 22 added checks that refuse a candidate for what its timings look like: the repeat-visit rule
(a median far below the first visits to the timing sets), the executor's clock around the timed calls
(executor.clockcheck) and the inputs' check (an ``in`` array changed). Each must never refuse honest
code, also on a loaded 2-core host. This runs honest host candidates of several shapes (memory-bound
and small, memory-bound and larger than the host cache, compute-bound, a reduction, a sort) through the
candidate worker with a call limit, as the evaluator does (so that the calls are announced and the
executor's clock is compared), ``--repeats`` times each, in ``--parallel`` processes at once (each a
load on the others), and prints how many passed and every refusal's message. The host compiler builds
the candidates (no nvcc needed). Repeat-visit ratios and windows are not printed: only verdicts, which
is what a user sees.
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from executor.runlimit import CallLimit
from executor.sandbox import run_job
from executor.worker.messages import CandidateRun
from tests.support.hostcode import FAST, build_host_candidates, one_input_task, timing_set_job, write_task

SCALE = 'extern "C" void scale(int n, const float* x, float* y) { for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i] + 1.0f; }'
SUM = (
    'extern "C" void sum(int n, const float* x, double* s) { double t = 0; for (int i = 0; i < n; ++i) t += x[i]; '
    "s[0] = t; }"
)
POLY = (
    'extern "C" void poly(int n, const float* x, float* y) { for (int i = 0; i < n; ++i) { float v = x[i]; '
    "for (int k = 0; k < 300; ++k) v = v * 0.999f + 0.001f * x[i]; y[i] = v; } }"
)
SORT = (
    '#include <algorithm>\n#include <cstring>\nextern "C" void sort_f(int n, const float* x, float* y) { '
    "std::memcpy(y, x, (size_t)n * sizeof(float)); std::sort(y, y + n); }"
)
# name: (task.json, the honest code, which is the reference too)
SHAPES: dict[str, tuple[dict[str, Any], str]] = {
    "scale_small": (
        one_input_task("scale", domain="elementwise", description="y=2x+1", timing=1 << 17),
        SCALE,
    ),
    "scale_large": (
        one_input_task("scale", domain="elementwise", description="y=2x+1", timing=24 << 20),
        SCALE,
    ),
    "sum_small": (
        one_input_task(
            "sum", domain="reduction", description="sum", timing=1 << 16, output=("s", "float64", "1")
        ),
        SUM,
    ),
    "poly": (
        one_input_task(
            "poly", domain="elementwise", description="poly", timing=1 << 17, rtol=1e-4, atol=1e-5
        ),
        POLY,
    ),
    "sort": (
        one_input_task("sort_f", domain="sort", description="sorted", timing=1 << 19, rtol=0.0, atol=0.0),
        SORT,
    ),
}
# As the evaluator sets one: every call announced to the executor.
LIMIT = CallLimit(seconds=30.0, floor_s=20.0, factor=10.0, basis="reference", basis_ms=1000.0)


def run_shapes(repeats: int) -> list[tuple[str, bool, str]]:
    """Every shape ``repeats`` times: (shape, passed, message)."""
    results = []
    options = FAST.model_copy(update={"min_trials": 5, "max_trials": 30})
    with tempfile.TemporaryDirectory() as tmp:
        for name, (spec, code) in SHAPES.items():
            directory = Path(tmp) / name
            task = write_task(directory, spec, code)
            product = build_host_candidates(directory, {"honest": code})["honest"]
            for r in range(repeats):
                run = CandidateRun(candidate_product=product, candidate_symbol=task.entry, call_limit=LIMIT)
                outcome = run_job(timing_set_job(task, directory / f"r{r}", options), run, timeout_s=300)
                results.append((name, outcome.passed, outcome.message))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--parallel", type=int, default=1, help="processes at once, each a load on the others"
    )
    parser.add_argument("--md", type=Path, help="also write the table here")
    args = parser.parse_args()
    began = time.monotonic()
    with multiprocessing.get_context("spawn").Pool(args.parallel) as pool:
        batches = pool.map(run_shapes, [args.repeats] * args.parallel)
    rows = [row for batch in batches for row in batch]
    lines = [
        f"honest candidates through the candidate worker with a call limit: {args.repeats} repeats x "
        f"{args.parallel} processes at once, {platform.node()}, {time.monotonic() - began:.0f} s",
        "",
        "| shape | runs | passed | refused |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name in SHAPES:
        mine = [row for row in rows if row[0] == name]
        passed = sum(1 for row in mine if row[1])
        lines.append(f"| {name} | {len(mine)} | {passed} | {len(mine) - passed} |")
    refusals = [f"- {name}: {message}" for name, ok, message in rows if not ok]
    lines += ["", "Refusals:" if refusals else "No refusals.", *refusals]
    text = "\n".join(lines)
    print(text)
    if args.md:
        args.md.write_text(text + "\n")


if __name__ == "__main__":
    main()
