"""What a candidate worker's preparation costs on the host CPU, per stage, without a GPU (session 30).

The stages ``inputs`` (the evaluation's fresh input sets), ``timing_inputs`` (the task's timing sets
loaded from the store, or drawn; a function task's rotated host copies) and ``expected_check`` (the
stored reference outputs' digests) of :meth:`executor.worker.candidate.Worker.prepare`, run by the real
worker class on the benchmark's own task definitions, as a candidate's worker does before its GPU turn.
The store is filled first, as the task's reference worker and its executor do once per task (not
counted). A kernel task's device uploads are GPU work and are not made here (runtime ``host``: no
slots); a function task's host copies are.

Each task is prepared ``--repeats`` times, each time by a fresh worker with fresh seeds (as every
candidate of a task is); printed: per task and stage the minimum and median wall seconds, the CPU
seconds of the whole preparation (this process's user+system time), then per task kind the mean over
its tasks of those medians.

It runs on this tree or, with ``PYTHONPATH`` at another tree (``git archive 57d0025``), on that tree:

    python -m bench.probes.prep_cost --repeats 5 --store /tmp/prep_store_new
    PYTHONPATH=/tmp/base57 python /work/wt/prep30/bench/probes/prep_cost.py --repeats 5 \\
        --store /tmp/prep_store_base --tasks-root /work/wt/prep30/regraph_data

With ``--hand-overs`` each repeat first does what the executor does on every job hand-over and
admission when it runs as root with jailed workers (``executor.sandbox._open_timing_sets``: it opens the
task's stored sets to the jail's uid); without it the probe skips the sandbox, which is not what a
candidate worker meets in production (review 31: that call's chmod gave every stored file a new change
time, and the stored sets were hashed again). It needs root to do anything.

The default task list is the `long` queue of ``bench/device/run_s18_ab.sh`` (``--limit 8``: the first
eight function and eight kernel tasks by name).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from executor import timingset
from executor.abi import bind_entry, call_entry
from executor.inputs import generate_inputs
from executor.protocol import EvaluationOptions
from executor.reference import build_reference
from executor.taskformat import KernelTask, load_task
from executor.worker.candidate import Worker
from executor.worker.messages import WorkerJob, input_plan

STAGES = ["inputs", "timing_inputs", "expected_check"]


def task_dirs(root: Path, limit: int) -> list[Path]:
    """The first ``limit`` function and kernel tasks by name, as the `long` queue takes them."""
    dirs: list[Path] = []
    for sub in ("tasks", "kernel_tasks"):
        found = sorted(d for d in (root / sub).iterdir() if (d / "task.json").is_file())
        dirs += found[:limit]
    return dirs


def spec_of(task: Any, library: Path, store: Path) -> Any:
    """The task's timing-set spec under ``store`` (no secret: the same seeds on both trees)."""
    return timingset.timing_set_spec(task, library, store)


def fill_store(task: Any, library: Path, spec: Any, options: EvaluationOptions) -> float:
    """Store every timing set the task's candidates load, as the reference worker and its executor
    do once per task; the seconds it took (0 when already stored)."""
    variants = getattr(timingset, "variants", None)
    specs = variants(spec, options.timing_sets) if variants is not None else [spec]
    t0 = time.perf_counter()
    made = False
    lib = __import__("ctypes").CDLL(str(library))
    fn = bind_entry(lib, task.reference_symbol, task)
    for variant in specs:
        if timingset.stored(variant):
            continue
        made = True
        inputs = generate_inputs(task, "timing", variant.seed, lib)
        work = inputs.copy()
        call_entry(fn, task, work.scalars, work.arrays)
        expected = {a.name: work.arrays[a.name] for a in task.outputs}
        timingset.store(variant, task, inputs, expected)
    return time.perf_counter() - t0 if made else 0.0


def hand_over(spec: Any) -> None:
    """What the executor does with the task's stored sets (``spec``'s and its variants') on each job
    hand-over (as root)."""
    from executor import sandbox

    sandbox._open_timing_sets(spec.dir)


def prepare_once(
    task: Any, library: Path, spec: Any, options: EvaluationOptions, rng: random.Random
) -> dict[str, float]:
    """One candidate worker's preparation, step by step as :meth:`Worker.prepare` takes it (the
    worker's own methods): each stage's CPU seconds (this process's user+system time: the host is
    shared, so wall time says little) and the wall seconds of it all."""
    seeds = [rng.getrandbits(62) for _ in range(len(input_plan(options, [0] * 64)))]
    job = WorkerJob(
        task=task,
        runtime="host",
        reference_library=str(library),
        seeds=seeds,
        options=options,
        timing_set=spec,
    )
    worker = Worker(job)
    out: dict[str, float] = {}
    wall0 = time.perf_counter()
    t = time.process_time()

    def lap(key: str) -> None:
        nonlocal t
        now = time.process_time()
        out[key] = out.get(key, 0.0) + now - t
        t = now

    worker.sets = [generate_inputs(task, size, seed, worker.reference_lib) for seed, size in worker.plan]
    lap("inputs")
    worker.timing_sources = worker._timing_sources()
    lap("timing_inputs")
    if hasattr(worker, "_check_expected_ahead"):
        worker.expected_checked = worker._check_expected_ahead()
    lap("expected_check")
    worker.slots = worker._prepared_slots(contextlib.nullcontext)
    lap("timing_inputs")
    out["cpu"] = sum(out[k] for k in STAGES)
    out["wall"] = time.perf_counter() - wall0
    del worker
    gc.collect()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks-root", type=Path, default=Path("regraph_data"))
    parser.add_argument("--limit", type=int, default=8, help="tasks of each kind (first by name)")
    parser.add_argument("--only", action="append", default=[], help="only these task ids")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--store", type=Path, required=True, help="the timing-set store (kept between runs)")
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "prep_cost_cache", help="reference builds"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--hand-overs",
        action="store_true",
        help="before each repeat, open the sets to the jail as the executor does on a job hand-over",
    )
    args = parser.parse_args(argv)

    options = EvaluationOptions()
    rng = random.Random(args.seed)
    rows: list[tuple[str, str, dict[str, list[float]]]] = []
    print(
        f"# prep_cost: {sys.modules['executor'].__file__}, {args.repeats} repeats"
        + (", hand-overs" if args.hand_overs else ""),
        flush=True,
    )
    for d in task_dirs(args.tasks_root, args.limit):
        task = load_task(d)
        if args.only and task.id not in args.only:
            continue
        kind = "kernel" if isinstance(task, KernelTask) else "function"
        library = build_reference(task, args.cache)
        spec = spec_of(task, library, args.store)
        filled = fill_store(task, library, spec, options)
        samples: dict[str, list[float]] = {k: [] for k in [*STAGES, "cpu", "wall"]}
        for _ in range(args.repeats):
            if args.hand_overs:  # the set and its variants (DIR.N) alike
                hand_over(spec)
            for k, v in prepare_once(task, library, spec, options, rng).items():
                samples[k].append(v)
        rows.append((kind, task.id, samples))
        med = {k: statistics.median(v) for k, v in samples.items()}
        print(
            f"{task.id}: store {filled:.1f} s; "
            + ", ".join(f"{k} {min(v):.3f}/{med[k]:.3f}" for k, v in samples.items()),
            flush=True,
        )
    cols = [*STAGES, "cpu", "wall"]
    print("\n| task | kind | " + " | ".join(f"{c} min/med s" for c in cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for kind, tid, samples in rows:
        cells = [f"{min(samples[c]):.3f}/{statistics.median(samples[c]):.3f}" for c in cols]
        print(f"| {tid} | {kind} | " + " | ".join(cells) + " |")
    print("\n| kind (mean over tasks of the median) | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for kind in ("function", "kernel"):
        of = [s for k, _, s in rows if k == kind]
        if of:
            means = [statistics.fmean(statistics.median(s[c]) for s in of) for c in cols]
            print(f"| {kind} (n {len(of)}) | " + " | ".join(f"{m:.3f}" for m in means) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
