"""Re-word the method names of `bench/trajectories/` the way a free-writing teacher would.

    python -m bench.probes.reword_trajectories --out /tmp/reworded   # writes one JSONL per task

The project's trajectories were written with consistent method names; a real teacher (DeepSeek-R1,
Qwen-32B...) names the same technique in many ways. Each method name is replaced by one of several
re-wordings (paraphrases, abbreviations, informal and non-native phrasings), chosen by a hash of the
task, trajectory and step, so the output is deterministic. Nothing else changes (think, detail, code).

The relabel benchmark reads these steps (with their code) as its code-bearing items, and
`python -m bench.probes.relabel_bench --convergence` builds a graph from them and checks that it converges to
the same techniques as a graph built from the original names.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.split import DEFAULT_TRAJECTORIES_DIR

REWORDINGS: dict[str, tuple[str, ...]] = {
    "Parallelization": (
        "Naive GPU kernel, one thread per output",
        "Move the loop onto CUDA threads",
        "Initial CUDA offload",
        "make it run on gpu (thread per element)",
        "Parallelize loop with CUDA kernel",
    ),
    "Vectorized memory access": (
        "Wide vector loads (float4)",
        "vectorize the loads/stores",
        "Use 128-bit vector types for memory",
        "Vector load of several elements per instruction",
    ),
    "Shared memory tiling": (
        "Tile the data through shared memory",
        "smem tiling",
        "Stage tiles in __shared__ memory",
        "Using shared memory tile for data reuse",
    ),
    "Shared-memory tiling": ("Shared-mem tiles", "tile into shared memory"),
    "Algorithm restructuring": (
        "Rework the algorithm",
        "algorithmic rewrite",
        "Restructure the computation",
        "Change algorithm for parallel efficiency",
    ),
    "Thread coarsening": (
        "Several outputs per thread",
        "coarsen the threads",
        "More work for each thread",
    ),
    "Memory coalescing": (
        "Coalesce the global accesses",
        "coalesced reads",
        "Make warp access contiguous memory",
    ),
    "Memory access coalescing": ("Coalesced memory access", "fix access pattern for coalescing"),
    "Warp shuffle reduction": (
        "Shuffle-based warp reduction",
        "warp reduce with __shfl_down_sync",
        "Reduce in warp by shuffle",
    ),
    "Warp-level shuffle reduction": ("warp-level reduce via shfl",),
    "Register tiling": (
        "Register blocking",
        "keep output tile in registers",
        "Per-thread register tile",
    ),
    "Kernel fusion": ("Fuse the kernels", "merge kernels into one", "Single fused kernel"),
    "Occupancy-aware launch bounds": (
        "Add __launch_bounds__",
        "launch bounds for occupancy",
        "Limit registers with launch bounds",
    ),
    "Read-only cache (__ldg)": ("Loads through __ldg", "use read-only cache", "ldg for read-only inputs"),
    "Loop unrolling": ("Unroll the inner loop", "pragma unroll", "Unrolled loops"),
    "Unrolling loops": ("unroll loops",),
    "Bank conflict avoidance": ("Pad shared memory against bank conflicts", "avoid smem bank conflicts"),
    "Privatization": ("Private per-block copies", "privatize the bins", "Per-block private accumulation"),
    "Constant memory": ("Move coefficients to __constant__", "use const mem", "Constant-memory coefficients"),
    "Grid-stride loop": ("Grid-stride looping", "stride over the whole grid", "Grid stride loop kernel"),
    "Atomic operation optimization": ("Cut down atomic contention", "fewer atomics", "Optimize the atomics"),
    "Branch elimination": ("Branchless rewrite", "remove branches", "Eliminate conditionals"),
    "Precomputation / lookup table": ("Precompute into a table", "lookup table", "Precomputed values table"),
    "Fast math intrinsics": (
        "Use fast intrinsics (__expf)",
        "fast-math intrinsics",
        "Hardware math intrinsics",
    ),
    "Warp-level scan with shuffles": ("Warp scan via __shfl_up_sync", "shuffle-based warp prefix sum"),
    "Pinned host memory": ("Page-locked host buffers",),
    "Vectorized loads (uint4)": ("uint4 wide loads",),
    "Block size tuning": ("Tune threads per block",),
    "Double buffering": ("Ping-pong buffering",),
    "Warp divergence reduction": ("Reduce branch divergence in warps",),
    "Loop tiling": ("Loop blocking",),
    "Warp shuffle exchange": ("Lane exchange with __shfl_sync",),
}


@dataclass(frozen=True)
class RewordedStep:
    """A step of a re-worded trajectory, with the code it starts from."""

    task_id: str
    trajectory: int
    step: int
    original: str
    method: str
    detail: str
    think: str
    code_before: str
    code_after: str


def reword(method: str, task_id: str, trajectory: int, step: int) -> str:
    """The re-wording of `method` for this step (the method itself when none is listed)."""
    options = REWORDINGS.get(method)
    if not options:
        return method
    digest = hashlib.sha256(f"{task_id}|{trajectory}|{step}|{method}".encode()).digest()
    return options[digest[0] % len(options)]


def reworded_lines(path: Path) -> Iterator[str]:
    """The JSONL lines of one trajectory file with re-worded method names."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        trajectory = json.loads(line)
        for index, step in enumerate(trajectory["steps"], start=1):
            step["method"] = reword(step["method"], trajectory["task_id"], number, index)
        yield json.dumps(trajectory)


def reworded_steps(
    trajectories_dir: Path = DEFAULT_TRAJECTORIES_DIR, tasks_dir: Path | None = None
) -> Iterator[RewordedStep]:
    """Every step of every trajectory with its re-worded name and its code before and after."""
    from bench.split import DEFAULT_TASKS_DIR

    tasks = tasks_dir or DEFAULT_TASKS_DIR
    for path in sorted(trajectories_dir.glob("*.jsonl")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            trajectory = json.loads(line)
            reference = tasks / trajectory["task_id"] / "reference.cpp"
            before = reference.read_text() if reference.exists() else ""
            for index, step in enumerate(trajectory["steps"], start=1):
                yield RewordedStep(
                    task_id=trajectory["task_id"],
                    trajectory=number,
                    step=index,
                    original=step["method"],
                    method=reword(step["method"], trajectory["task_id"], number, index),
                    detail=step.get("detail", ""),
                    think=step.get("think", ""),
                    code_before=before,
                    code_after=step["code"],
                )
                before = step["code"]


def write_reworded(out_dir: Path, trajectories_dir: Path = DEFAULT_TRAJECTORIES_DIR) -> list[Path]:
    """Write a re-worded copy of every trajectory file into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(trajectories_dir.glob("*.jsonl")):
        target = out_dir / path.name
        target.write_text("".join(line + "\n" for line in reworded_lines(path)))
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command line: write re-worded trajectories."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the re-worded JSONL files")
    parser.add_argument("--trajectories", type=Path, default=DEFAULT_TRAJECTORIES_DIR)
    args = parser.parse_args(argv)
    written = write_reworded(args.out, args.trajectories)
    print(f"wrote {len(written)} re-worded trajectory files to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
