"""Do correct CUDA kernels pass the converted ParEval tasks, and do empty ones fail?

    regraph bench pareval --pareval-dir DIR --out OUT --executor-url URL --check-kernels bench/pareval_kernels

For every converted task (`bench.pareval`), the kernel ``<task id>.cu`` of the kernels directory (our own
straightforward kernels, ``bench/pareval_kernels``) goes through the executor with the default checks
(fresh input sets at ParEval's validation size, at least one at its benchmark size, poisoned outputs),
and so does an empty-bodied kernel of the task's signature, which must fail. ``OUT/check.json`` and
``OUT/check.md`` hold one row per task: the kernel's verdict (with its message when it did not pass),
its speedup over the serial reference, and the empty kernel's verdict. A kernel that fails is a finding:
either the kernel or the conversion is wrong.

Against a compile-only executor (no GPU) the verdicts stop after compilation (``runtime_not_available``):
the table then says that every kernel compiled and the reference ran, nothing about correctness.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bench.metrics import BenchError
from bench.pareval import Conversion, converted_tasks
from executor.client import ExecutorClient
from executor.errors import ExecutorError
from executor.protocol import EvaluationOptions
from executor.taskformat import KernelTask
from executor.verdict import ErrorKind, Verdict

CHECK_FORMAT = "regraph.pareval-check/v1"
NOT_RUN = ErrorKind.RUNTIME_NOT_AVAILABLE


class CheckRow(BaseModel):
    """One converted task: our kernel's verdict and the empty kernel's."""

    task_id: str
    kernel: str  # pass | compiled | fail | missing
    kernel_error: str | None = None
    kernel_message: str = ""
    input_sets_checked: int = 0
    speedup: float | None = None
    empty: str  # rejected | compiled | ACCEPTED
    empty_error: str | None = None
    empty_message: str = ""


class CheckReport(BaseModel):
    """``check.json``."""

    format: str = CHECK_FORMAT
    date: str
    command: str
    executor_url: str
    device: str
    runtime_checks: bool
    kernels_dir: str
    rows: list[CheckRow]

    @property
    def total(self) -> int:
        """Converted tasks checked."""
        return len(self.rows)

    def count(self, column: str, value: str) -> int:
        """Rows whose `column` (kernel or empty) says `value`."""
        return sum(1 for r in self.rows if getattr(r, column) == value)

    def summary(self) -> str:
        """The one-line result."""
        n = self.total
        if not self.runtime_checks:
            return (
                f"compile-only executor: {self.count('kernel', 'compiled')} of {n} kernels and "
                f"{self.count('empty', 'compiled')} of {n} empty kernels compiled and their references ran "
                f"(no correctness verdicts); {self.count('kernel', 'fail')} kernels and "
                f"{self.count('empty', 'rejected')} empty kernels were rejected before running, "
                f"{self.count('kernel', 'missing')} kernels missing"
            )
        return (
            f"{self.count('kernel', 'pass')} of {n} kernels pass; {self.count('empty', 'rejected')} of {n} "
            f"empty kernels rejected; {self.count('kernel', 'missing')} kernels missing"
        )


def empty_kernel(task: KernelTask) -> str:
    """A kernel with the task's signature and an empty body: it writes no output."""
    return f'extern "C" {task.kernel.signature.strip().rstrip(";")} {{}}\n'


def _kernel_status(verdict: Verdict) -> str:
    if verdict.passed:
        return "pass"
    return "compiled" if verdict.error == NOT_RUN else "fail"


def _empty_status(verdict: Verdict) -> str:
    if verdict.passed:
        return "ACCEPTED"
    return "compiled" if verdict.error == NOT_RUN else "rejected"


def check_kernels(
    tasks_dir: Path,
    conversion: Conversion,
    kernels_dir: Path,
    client: ExecutorClient,
    executor_url: str,
    command: str,
    options: EvaluationOptions | None = None,
) -> CheckReport:
    """Send every converted task's kernel and an empty kernel through the executor; return the report."""
    options = options or EvaluationOptions(baseline=False)
    if options.timing_size_checks < 1:
        raise BenchError("the check needs timing_size_checks >= 1: ParEval's benchmark size must be checked")
    if not kernels_dir.is_dir():
        raise BenchError(f"no kernels directory {kernels_dir}")
    try:
        device = client.device()
    except ExecutorError as e:
        raise BenchError(f"the executor at {executor_url} does not answer: {e}") from e
    rows = []
    for task in converted_tasks(tasks_dir, conversion):
        try:
            empty = client.evaluate(
                task, empty_kernel(task), options.model_copy(update={"run_timing": False})
            )
            source_path = kernels_dir / f"{task.id}.cu"
            verdict = (
                client.evaluate(task, source_path.read_text(encoding="utf-8"), options)
                if source_path.is_file()
                else None
            )
        except ExecutorError as e:
            raise BenchError(f"the executor failed on {task.id}: {e}") from e
        row: dict[str, Any] = {
            "task_id": task.id,
            "empty": _empty_status(empty),
            "empty_error": empty.error.value if empty.error else None,
            "empty_message": empty.message[:400],
        }
        if verdict is None:
            row.update(kernel="missing", kernel_message=f"no {source_path}")
        else:
            row.update(
                kernel=_kernel_status(verdict),
                kernel_error=verdict.error.value if verdict.error else None,
                kernel_message=verdict.message[:400],
                input_sets_checked=verdict.input_sets_checked,
                speedup=verdict.speedup,
            )
        rows.append(CheckRow.model_validate(row))
    name = device.name or "no GPU"
    return CheckReport(
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        command=command,
        executor_url=executor_url,
        device=f"{name} ({device.arch}, runtime {device.runtime})",
        runtime_checks=device.runtime_checks_available,
        kernels_dir=str(kernels_dir),
        rows=rows,
    )


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "/").split())


def render_markdown(report: CheckReport) -> str:
    """``check.md``: the table and the summary line."""
    lines = [
        "# ParEval conversion check: our kernels and empty kernels through the executor",
        "",
        f"{report.date}; executor {report.executor_url} on {report.device}; kernels from "
        f"`{report.kernels_dir}`.",
        "",
        f"Command: `{report.command}`",
        "",
        "| task | kernel | input sets | speedup | empty kernel | message (kernel, when it did not pass) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in report.rows:
        kernel = (
            r.kernel if r.kernel_error is None or r.kernel == "compiled" else f"{r.kernel} ({r.kernel_error})"
        )
        empty = r.empty if r.empty_error is None or r.empty == "compiled" else f"{r.empty} ({r.empty_error})"
        speedup = f"{r.speedup:.2f}" if r.speedup is not None else "-"
        message = "" if r.kernel in ("pass", "compiled") else _cell(r.kernel_message)[:300]
        lines.append(
            f"| `{r.task_id}` | {kernel} | {r.input_sets_checked} | {speedup} | {empty} | {message} |"
        )
    lines += ["", f"**{report.summary()}**", ""]
    return "\n".join(lines)


def write_report(report: CheckReport, out: Path) -> None:
    """Write ``check.json`` and ``check.md`` into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    data = report.model_dump(mode="json")
    data["summary"] = report.summary()
    (out / "check.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    (out / "check.md").write_text(render_markdown(report), encoding="utf-8")
