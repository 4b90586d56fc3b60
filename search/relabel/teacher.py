"""Trajectories written by a teacher model: the `TrajectorySource` that prompts a `ChatModel` per task.

For each task (an executor task directory, `executor.taskformat.load_task`) the teacher is shown the
task, its contract and the serial reference, and asked to optimize it step by step, answering with a
JSON object ``{"steps": [{"method", "think", "detail", "code"}, ...]}`` (`TEACHER_ANSWER_SCHEMA`,
sent as the backend's structured-output schema where it has one). Each step's code is the complete
program after that step. A well-formed answer becomes a `regraph.trajectory/v1` trajectory that
`GraphBuilder.build` ingests exactly like a file's; a bad answer (not JSON, wrong shape, truncated, a
step that drops the entry point, a model error) skips that task with a recorded reason, and the build
goes on. The trajectories can also be appended to a JSONL file, which `regraph graph build FILE`
ingests later with no model at all (the same content ids, so nothing is added twice).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from executor.errors import ExecutorError
from executor.taskformat import load_task
from search.backends.base import ChatMessage, ChatModel, ModelError
from search.codeextract import TaskKind, entry_point_preserved, extract_code
from search.errors import CodeExtractionError
from search.header import format_header
from search.policy import TaskContext
from search.relabel.construction import (
    ConstructionError,
    ReferenceNotFoundError,
    SourcedTrajectory,
    Trajectory,
    TrajectoryStep,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_STEPS = 4

TEACHER_SYSTEM_PROMPT = (
    "You are an expert CUDA performance engineer teaching a junior engineer. You optimize a program "
    "in small, named steps, each applying one optimization technique, and you explain each step. "
    "Every step keeps the results identical. You answer with JSON only."
)


class TeacherTaskError(ConstructionError):
    """A teacher task cannot be found or read."""


class TeacherAnswer(BaseModel):
    """What the teacher must answer: its optimization steps, in order."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    steps: list[TrajectoryStep] = Field(min_length=1)


def teacher_answer_schema(max_steps: int = DEFAULT_MAX_STEPS) -> dict[str, Any]:
    """The JSON schema of a teacher answer (for structured output), with at most `max_steps` steps."""
    step = {
        "type": "object",
        "additionalProperties": False,
        "required": ["method", "think", "detail", "code"],
        "properties": {
            "method": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "the optimization technique this step applies, in a few words",
            },
            "think": {"type": "string", "description": "why this technique, here and now"},
            "detail": {"type": "string", "description": "what changed in the code"},
            "code": {"type": "string", "minLength": 1, "description": "the complete program after the step"},
        },
    }
    return {
        "title": "teacher_trajectory",
        "type": "object",
        "additionalProperties": False,
        "required": ["steps"],
        "properties": {"steps": {"type": "array", "minItems": 1, "maxItems": max_steps, "items": step}},
    }


class TeacherAnswerError(ConstructionError):
    """A teacher's answer is not a usable trajectory (the message says why)."""


_FENCE = re.compile(r"```[A-Za-z0-9_+-]*\s*\n(.*?)```", re.DOTALL)


def _json_object(text: str) -> Any:
    """The JSON value in `text`: the whole text, else a fenced block, else the outermost braces."""
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise TeacherAnswerError("the answer is not JSON")


def _step_code(code: str, entry: str, kind: TaskKind) -> str:
    # Models often fence the code inside the JSON string; keep only the program.
    if "```" in code:
        try:
            code = extract_code(code, entry, kind)
        except CodeExtractionError as e:
            raise TeacherAnswerError(f"no code in a step: {e}") from e
    return code if code.endswith("\n") else code + "\n"


def parse_teacher_answer(
    text: str, *, entry: str, kind: TaskKind = "function", max_steps: int = DEFAULT_MAX_STEPS
) -> list[TrajectoryStep]:
    """The steps of a teacher answer, checked; raises `TeacherAnswerError` with the reason otherwise.

    Accepts the bare JSON object, a fenced one, or one surrounded by prose; a bare list of steps is
    taken as the steps. Each step's code must still define the task's entry point.
    """
    value = _json_object(text)
    if isinstance(value, list):
        value = {"steps": value}
    try:
        answer = TeacherAnswer.model_validate(value)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise TeacherAnswerError(f"the answer does not follow the schema: {where}: {first['msg']}") from e
    if len(answer.steps) > max_steps:
        raise TeacherAnswerError(f"the answer has {len(answer.steps)} steps, more than {max_steps}")
    steps = []
    for number, step in enumerate(answer.steps, start=1):
        code = _step_code(step.code, entry, kind)
        if not entry_point_preserved(code, entry, kind):
            raise TeacherAnswerError(f"step {number} ({step.method!r}) does not define `{entry}`")
        steps.append(step.model_copy(update={"code": code}))
    return steps


class TeacherSkip(BaseModel):
    """A task the teacher produced no trajectory for, and why."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    reason: str


@dataclass(frozen=True)
class TeacherTask:
    """A task as the teacher sees it."""

    context: TaskContext

    @property
    def id(self) -> str:
        """The task id."""
        return self.context.id


def load_teacher_tasks(spec: str, tasks_dir: Path) -> list[TeacherTask]:
    """The tasks named by `spec`: a task directory, a directory of task directories, or ids.

    Ids are comma-separated and looked up in `tasks_dir`. Raises `TeacherTaskError` for a task that
    cannot be read (before any model is called).
    """
    path = Path(spec)
    if path.is_dir():
        dirs = (
            [path] if (path / "task.json").is_file() else sorted(p.parent for p in path.glob("*/task.json"))
        )
        if not dirs:
            raise TeacherTaskError(f"{path} holds no task (no task.json in it or its subdirectories)")
    else:
        ids = [part.strip() for part in spec.split(",") if part.strip()]
        if not ids:
            raise TeacherTaskError("no teacher task given")
        dirs = [tasks_dir / task_id for task_id in ids]
    tasks = []
    for directory in dirs:
        try:
            task = load_task(directory)
        except ExecutorError as e:
            raise TeacherTaskError(f"cannot read the task at {directory}: {e}") from e
        tasks.append(TeacherTask(TaskContext.from_task_json(task.model_dump(mode="json"))))
    return tasks


def teacher_messages(task: TeacherTask, *, max_steps: int = DEFAULT_MAX_STEPS) -> list[ChatMessage]:
    """The prompt asking the teacher for a trajectory of at most `max_steps` steps for `task`."""
    c = task.context
    if c.kind == "kernel":
        contract = (
            f"Write the CUDA kernel `{c.kernel_signature or c.entry}`; the harness launches it with "
            f"{c.launch or 'a fixed configuration'}. Keep the kernel's name and parameters."
        )
    else:
        contract = (
            f'Define `extern "C" {c.signature}` with exactly this name and parameters. Pointer arguments '
            "are HOST pointers: the function allocates device memory, copies inputs, launches the kernels, "
            "copies outputs back and frees device memory. No printing, files, exit or state between calls."
        )
    schema = json.dumps(teacher_answer_schema(max_steps)["properties"]["steps"]["items"]["properties"])
    user = "\n\n".join(
        [
            format_header({"prompt": "teacher", "task": c.id}),
            f"Task `{c.id}`: {c.description}\nEntry point: `{c.signature}`\n\nContract: {contract}",
            f"Serial C++ reference:\n```cpp\n{c.initial_code.rstrip()}\n```",
            f"Optimize it for a modern NVIDIA GPU in 1 to {max_steps} steps. The first step turns the "
            "reference into a correct CUDA program; each later step applies one more optimization "
            "technique to the previous step's code. Name each technique in a few words (e.g. "
            '"Parallelization", "Shared memory tiling", "Loop unrolling").',
            'Answer with one JSON object {"steps": [...]} and nothing else; each step has the fields '
            f"{schema}. `code` is the complete source file after the step, not a diff.",
        ]
    )
    return [ChatMessage(role="system", content=TEACHER_SYSTEM_PROMPT), ChatMessage(role="user", content=user)]


TeacherProgress = Callable[[int, int, str], None]
"""Called after each task with (done, total, task id)."""


class TeacherTrajectorySource:
    """A `TrajectorySource`: one trajectory per task, written by a teacher `ChatModel`.

    Tasks are asked `concurrency` at a time (a vLLM server batches them); trajectories come out in task
    order. `skipped` lists the tasks that gave none, with the reason. With `record_path`, every
    trajectory is appended to that JSONL file as it is accepted.
    """

    def __init__(
        self,
        model: ChatModel,
        tasks: Sequence[TeacherTask],
        *,
        model_name: str,
        max_steps: int = DEFAULT_MAX_STEPS,
        max_tokens: int = 8192,
        temperature: float = 0.2,
        seed: int | None = 0,
        concurrency: int = 1,
        record_path: Path | None = None,
        close_model: bool = False,
        progress: TeacherProgress | None = None,
    ) -> None:
        """`model_name` is recorded on the trajectories; `close_model` closes the model when done."""
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.model = model
        self.tasks = list(tasks)
        self.model_name = model_name
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.concurrency = concurrency
        self.record_path = record_path
        self.close_model = close_model
        self.progress = progress
        self.skipped: list[TeacherSkip] = []
        self._references = {t.id: t.context.initial_code for t in self.tasks}

    def reference(self, task_id: str) -> str:
        """The serial reference of one of the teacher's tasks (a `ReferenceSource`)."""
        try:
            return self._references[task_id]
        except KeyError as e:
            raise ReferenceNotFoundError(f"{task_id!r} is not one of the teacher's tasks") from e

    def __call__(self) -> Iterable[SourcedTrajectory]:
        """Ask the teacher about every task (blocking) and return the trajectories it wrote."""
        self.skipped = []
        return asyncio.run(self._generate_all())

    async def _generate_all(self) -> list[SourcedTrajectory]:
        gate = asyncio.Semaphore(self.concurrency)
        done = 0

        async def one(task: TeacherTask) -> SourcedTrajectory | TeacherSkip:
            nonlocal done
            async with gate:
                outcome = await self.generate(task)
            done += 1
            if self.progress is not None:
                self.progress(done, len(self.tasks), task.id)
            return outcome

        try:
            outcomes = await asyncio.gather(*(one(t) for t in self.tasks))
        finally:
            if self.close_model:
                await self.model.aclose()
        out: list[SourcedTrajectory] = []
        for outcome in outcomes:
            if isinstance(outcome, TeacherSkip):
                logger.warning("teacher skipped task %s: %s", outcome.task_id, outcome.reason)
                self.skipped.append(outcome)
                continue
            out.append(outcome)
            if self.record_path is not None:
                self._record(outcome.trajectory)
        return out

    async def generate(self, task: TeacherTask) -> SourcedTrajectory | TeacherSkip:
        """One task's trajectory, or why there is none (never raises for a model or answer failure)."""
        messages = teacher_messages(task, max_steps=self.max_steps)
        try:
            completion = await self.model.complete(
                messages,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                seed=self.seed,
                json_schema=teacher_answer_schema(self.max_steps),
            )
        except ModelError as e:
            return TeacherSkip(task_id=task.id, reason=f"the teacher model failed: {e}")
        if completion.finish_reason == "length":
            return TeacherSkip(task_id=task.id, reason=f"the answer was cut at {self.max_tokens} tokens")
        try:
            steps = parse_teacher_answer(
                completion.text, entry=task.context.entry, kind=task.context.kind, max_steps=self.max_steps
            )
        except TeacherAnswerError as e:
            return TeacherSkip(task_id=task.id, reason=str(e))
        trajectory = Trajectory(
            format="regraph.trajectory/v1", task_id=task.id, model=self.model_name, steps=steps
        )
        return SourcedTrajectory(trajectory, f"teacher:{self.model_name}:{task.id}")

    def _record(self, trajectory: Trajectory) -> None:
        assert self.record_path is not None
        self.record_path.parent.mkdir(parents=True, exist_ok=True)
        with self.record_path.open("a", encoding="utf-8") as handle:
            handle.write(trajectory.model_dump_json() + "\n")
