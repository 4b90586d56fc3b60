"""Static check of the benchmark tasks and their expert trajectories.

For every task directory under ``regraph_data/tasks`` this parses ``task.json`` (through
``executor.taskformat.load_task`` when the executor is importable, otherwise with a structural
check of its own), compiles ``reference.cpp`` (and ``generator.cpp``) with g++, compiles
``naive.cu`` and every step of ``bench/trajectories/<id>.jsonl`` with ``nvcc -c``, and prints one
row per task.  The exit status is non-zero when anything fails.

No GPU is needed: nvcc only compiles.  Successful compilations are remembered in a cache keyed by
the source and the command line, so a second run only recompiles what changed.

Usage::

    python -m bench.probes.check_tasks [--only ID ...] [-j N] [--no-nvcc] [--no-cache]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger("bench.probes.check_tasks")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TASKS_DIR = REPO_ROOT / "regraph_data" / "tasks"
DEFAULT_TRAJECTORIES_DIR = REPO_ROOT / "bench" / "trajectories"
CACHE_DIR = Path(os.environ.get("REGRAPH_CACHE_DIR", Path.home() / ".cache" / "regraph")) / "check_tasks"

TASK_FORMAT = "regraph.task/v1"
TRAJECTORY_FORMAT = "regraph.trajectory/v1"
ID_PATTERN = re.compile(r"^[a-z0-9_]+$")
TIERS = ("easy", "medium", "hard")

GXX_FLAGS = ("-std=c++17", "-O2", "-Wall", "-Werror=return-type", "-c")
# The flags the toolchain itself needs (the executor's `Toolchain.extra_flags`: e.g. the CCCL
# version-guard define when a PyPI nvcc comes with runtime headers of another minor version) are
# added to these by `find_nvcc`, exactly as the executor adds them.
NVCC_FLAGS = ("-std=c++17", "-arch=sm_90")

# Things a candidate must not do (task-format.md, "Function tasks"): print, touch files, exit.
FORBIDDEN_CALLS = re.compile(r"\b(printf|fprintf|puts|std::cout|std::cerr|fopen|exit|abort)\s*\(")


class TaskCheckError(Exception):
    """Root of this tool's errors."""


class MissingCompilerError(TaskCheckError):
    """A compiler this check needs cannot be found."""


def tier_for_steps(steps: int) -> str:
    """The tier that a trajectory of ``steps`` steps belongs to (easy 1-2, medium 3-5, hard 6+)."""
    if steps <= 2:
        return "easy"
    if steps <= 5:
        return "medium"
    return "hard"


def find_nvcc() -> tuple[Path, tuple[str, ...]]:
    """The nvcc that the executor would use and the flags it needs (the executor's discovery,
    `executor.compile.find_toolchain`); ``$REGRAPH_NVCC`` names one explicitly."""
    try:  # imported here, like load_task: the structural checks run without the executor's packages
        from executor.compile import find_toolchain
        from executor.errors import ToolchainError as ExecutorToolchainError
    except ImportError as e:
        raise MissingCompilerError(f"finding nvcc needs the executor package (or pass --no-nvcc): {e}") from e
    try:
        toolchain = find_toolchain(os.environ.get("REGRAPH_NVCC"))
    except ExecutorToolchainError as e:
        raise MissingCompilerError(f"{e}: set REGRAPH_NVCC or install the 'nvcc' extra") from e
    return toolchain.nvcc, toolchain.extra_flags


def find_gxx() -> Path:
    """Locate the host C++ compiler (``$CXX`` or g++)."""
    name = os.environ.get("CXX", "g++")
    found = shutil.which(name)
    if not found:
        raise MissingCompilerError(f"C++ compiler {name!r} not found")
    return Path(found)


@dataclass
class CompilerCommand:
    """One compiler command line with a cache of sources it already accepted."""

    executable: Path
    flags: tuple[str, ...]
    suffix: str
    use_cache: bool = True

    def _key(self, source: str, extra: Sequence[str]) -> str:
        digest = hashlib.sha256()
        for part in (str(self.executable), *self.flags, *extra, source):
            digest.update(part.encode())
            digest.update(b"\0")
        return digest.hexdigest()

    def compile(self, source: str, extra: Sequence[str] = ()) -> str | None:
        """Compile ``source`` to an object that is thrown away; return the diagnostics on failure."""
        key = self._key(source, extra)
        stamp = CACHE_DIR / key
        if self.use_cache and stamp.exists():
            return None
        with tempfile.TemporaryDirectory(prefix="regraph-check-") as tmp:
            src = Path(tmp) / f"unit{self.suffix}"
            src.write_text(source)
            cmd = [str(self.executable), *self.flags, *extra, "-o", str(Path(tmp) / "unit.o"), str(src)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp)
        if proc.returncode != 0:
            return (proc.stderr + proc.stdout).strip() or f"exit status {proc.returncode}"
        if self.use_cache:
            CACHE_DIR.mkdir(parents=True, exist_ok=True)
            stamp.touch()
        return None


def nvcc_compiler(use_cache: bool = True) -> CompilerCommand:
    """The CUDA compile check: the executor's nvcc with the flags that its toolchain needs."""
    executable, toolchain_flags = find_nvcc()
    return CompilerCommand(executable, (*NVCC_FLAGS, *toolchain_flags, "-c"), ".cu", use_cache=use_cache)


@dataclass
class TaskReport:
    """What was found for one task directory."""

    task_id: str
    tier: str = "-"
    steps: int = 0
    columns: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def fail(self, column: str, message: str) -> None:
        self.columns[column] = "FAIL"
        self.problems.append(f"{column}: {message}")

    @property
    def ok(self) -> bool:
        return not self.problems


def _structural_task_check(task_dir: Path, meta: dict[str, Any]) -> list[str]:
    """Checks done when the executor's pydantic model is not importable."""
    problems: list[str] = []
    if meta.get("format") != TASK_FORMAT:
        problems.append(f"format is {meta.get('format')!r}, expected {TASK_FORMAT!r}")
    for key in ("kind", "id", "domain", "description", "entry", "signature", "params", "args", "compare"):
        if key not in meta:
            problems.append(f"missing field {key!r}")
    params = meta.get("params", {})
    for name, sizes in params.items():
        if not (isinstance(sizes, dict) and {"test", "timing"} <= sizes.keys()):
            problems.append(f"param {name!r} needs test and timing values")
    for arg in meta.get("args", []):
        if arg.get("kind") == "array" and arg.get("intent") in ("in", "inout") and "generator" not in arg:
            problems.append(f"array {arg.get('name')!r} has no generator")
    customs = [a for a in meta.get("args", []) if a.get("generator", {}).get("dist") == "custom"]
    if customs and not (task_dir / "generator.cpp").is_file():
        problems.append("custom generator used but generator.cpp is missing")
    return problems


def _load_task_json(task_dir: Path, report: TaskReport) -> dict[str, Any] | None:
    path = task_dir / "task.json"
    try:
        meta: dict[str, Any] = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        report.fail("task.json", str(e))
        return None
    problems = _structural_task_check(task_dir, meta)
    if meta.get("id") != task_dir.name:
        problems.append(f"id {meta.get('id')!r} differs from directory name")
    if not ID_PATTERN.match(task_dir.name):
        problems.append("id must match [a-z0-9_]+")
    try:
        from executor.errors import ExecutorError
        from executor.taskformat import load_task
    except ImportError:
        logger.debug("executor not importable; task.json gets the structural check only")
    else:
        try:
            load_task(task_dir)
        except ExecutorError as e:
            problems.append(f"load_task: {e}")
    for problem in problems:
        report.fail("task.json", problem)
    if not problems:
        report.columns["task.json"] = "ok"
    return meta


def _check_candidate_text(source: str, entry: str) -> list[str]:
    problems = []
    if not re.search(r'extern\s+"C"[^;{]*\b' + re.escape(entry) + r"\s*\(", source):
        problems.append(f'no extern "C" definition of {entry}')
    stripped = re.sub(r"//[^\n]*|/\*.*?\*/", "", source, flags=re.S)
    bad = sorted(set(m.group(1) for m in FORBIDDEN_CALLS.finditer(stripped)))
    if bad:
        problems.append(f"forbidden calls: {', '.join(bad)}")
    return problems


def check_task(
    task_dir: Path,
    trajectories_dir: Path,
    gxx: CompilerCommand,
    nvcc: CompilerCommand | None,
    pool: ThreadPoolExecutor,
) -> TaskReport:
    """Check one task directory and its trajectory; compilations run on ``pool``."""
    report = TaskReport(task_id=task_dir.name)
    meta = _load_task_json(task_dir, report)
    entry = str(meta.get("entry", "")) if meta else ""
    jobs: list[tuple[str, Any]] = []

    ref = task_dir / "reference.cpp"
    if not ref.is_file():
        report.fail("reference", "reference.cpp missing")
    else:
        text = ref.read_text()
        if "__global__" in text or re.search(r"#\s*include\s*[<\"]cuda", text):
            report.fail("reference", "reference.cpp must be plain C++")
        if entry and not re.search(r'extern\s+"C"[^;{]*\b' + re.escape(entry) + r"\s*\(", text):
            report.fail("reference", f'no extern "C" definition of {entry}')
        jobs.append(("reference", pool.submit(gxx.compile, text)))
    gen = task_dir / "generator.cpp"
    if gen.is_file():
        text = gen.read_text()
        if "regraph_generate" not in text:
            report.fail("generator", "generator.cpp does not define regraph_generate")
        jobs.append(("generator", pool.submit(gxx.compile, text)))
    else:
        report.columns["generator"] = "-"

    naive = task_dir / "naive.cu"
    if not naive.is_file():
        report.fail("naive", "naive.cu missing")
    else:
        text = naive.read_text()
        for problem in _check_candidate_text(text, entry):
            report.fail("naive", problem)
        if nvcc is not None:
            jobs.append(("naive", pool.submit(nvcc.compile, text)))

    step_jobs: list[tuple[int, Any]] = []
    traj_path = trajectories_dir / f"{task_dir.name}.jsonl"
    if not traj_path.is_file():
        report.fail("trajectory", f"{traj_path.name} missing")
    else:
        lines = [ln for ln in traj_path.read_text().splitlines() if ln.strip()]
        if len(lines) != 1:
            report.fail("trajectory", f"expected one line, found {len(lines)}")
        for line in lines[:1]:
            try:
                traj = json.loads(line)
            except json.JSONDecodeError as e:
                report.fail("trajectory", f"not JSON: {e}")
                continue
            if traj.get("format") != TRAJECTORY_FORMAT:
                report.fail("trajectory", f"format {traj.get('format')!r}")
            if traj.get("task_id") != task_dir.name:
                report.fail("trajectory", f"task_id {traj.get('task_id')!r} differs from directory")
            steps = traj.get("steps") or []
            report.steps = len(steps)
            if not steps:
                report.fail("trajectory", "no steps")
            tier = tier_for_steps(len(steps))
            report.tier = tier
            hint = meta.get("tier_hint") if meta else None
            if steps and hint != tier:
                report.fail("trajectory", f"tier_hint {hint!r} but {len(steps)} steps means {tier!r}")
            for i, step in enumerate(steps, start=1):
                missing = [k for k in ("method", "think", "detail", "code") if not step.get(k)]
                if missing:
                    report.fail("steps", f"step {i} lacks {', '.join(missing)}")
                    continue
                for problem in _check_candidate_text(step["code"], entry):
                    report.fail("steps", f"step {i}: {problem}")
                if nvcc is not None:
                    step_jobs.append((i, pool.submit(nvcc.compile, step["code"])))

    for column, future in jobs:
        diagnostics = future.result()
        if diagnostics is not None:
            report.fail(column, diagnostics)
        else:
            report.columns.setdefault(column, "ok")
    failed_steps = []
    for i, future in step_jobs:
        diagnostics = future.result()
        if diagnostics is not None:
            failed_steps.append(i)
            report.problems.append(f"step {i}: {diagnostics}")
    if report.steps:
        if failed_steps or report.columns.get("steps") == "FAIL":
            report.columns["steps"] = f"FAIL {','.join(map(str, failed_steps))}".strip()
        else:
            report.columns["steps"] = f"{len(step_jobs)}/{report.steps} ok" if nvcc else "not compiled"
    report.columns.setdefault("trajectory", "ok")
    if nvcc is None:
        report.columns.setdefault("naive", "not compiled")
    return report


def task_dirs(tasks_dir: Path, only: Iterable[str] = ()) -> list[Path]:
    """The task directories to check, sorted by id (a directory counts when it has task.json)."""
    wanted = set(only)
    found = sorted(p for p in tasks_dir.iterdir() if p.is_dir() and (p / "task.json").is_file())
    if wanted:
        found = [p for p in found if p.name in wanted]
    return found


def print_table(reports: Sequence[TaskReport], verbose: bool) -> None:
    """Write the result table (and the diagnostics of failures) to stdout."""
    headers = [
        "task",
        "tier",
        "steps",
        "task.json",
        "reference",
        "generator",
        "naive",
        "trajectory",
        "step code",
    ]
    rows = [
        [
            r.task_id,
            r.tier,
            str(r.steps),
            r.columns.get("task.json", "?"),
            r.columns.get("reference", "?"),
            r.columns.get("generator", "?"),
            r.columns.get("naive", "?"),
            r.columns.get("trajectory", "?"),
            r.columns.get("steps", "-"),
        ]
        for r in reports
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]
    out = sys.stdout
    out.write("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + "\n")
    for row in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + "\n")
    tiers = {t: sum(1 for r in reports if r.tier == t) for t in TIERS}
    failed = [r for r in reports if not r.ok]
    out.write(
        f"\n{len(reports)} tasks ({', '.join(f'{k} {v}' for k, v in tiers.items())}), "
        f"{sum(r.steps for r in reports)} steps, {len(failed)} failing\n"
    )
    for r in failed:
        out.write(f"\n== {r.task_id}\n")
        for problem in r.problems:
            text = problem if verbose else "\n".join(problem.splitlines()[:15])
            out.write(f"  {text}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tasks-dir", type=Path, default=DEFAULT_TASKS_DIR)
    parser.add_argument("--trajectories-dir", type=Path, default=DEFAULT_TRAJECTORIES_DIR)
    parser.add_argument("--only", nargs="*", default=[], help="task ids to check (default: all)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--no-nvcc", action="store_true", help="skip the CUDA compilations")
    parser.add_argument("--no-cache", action="store_true", help="recompile everything")
    parser.add_argument("-v", "--verbose", action="store_true", help="full compiler diagnostics")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    try:
        gxx = CompilerCommand(find_gxx(), GXX_FLAGS, ".cpp", use_cache=not args.no_cache)
        nvcc = None if args.no_nvcc else nvcc_compiler(use_cache=not args.no_cache)
    except MissingCompilerError as e:
        logger.error("%s", e)
        return 2
    dirs = task_dirs(args.tasks_dir, args.only)
    if not dirs:
        logger.error("no task directories found under %s", args.tasks_dir)
        return 1
    # Each task is walked on a thread of its own (they mostly wait); the compilations of all tasks
    # share one pool sized to the cores, so the slow nvcc runs overlap across tasks.
    with (
        ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool,
        ThreadPoolExecutor(max_workers=min(32, len(dirs))) as walkers,
    ):
        futures = [walkers.submit(check_task, d, args.trajectories_dir, gxx, nvcc, pool) for d in dirs]
        reports = [f.result() for f in futures]
    print_table(reports, args.verbose)
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
