"""Building the reasoning graph from optimization trajectories (the paper's Algorithm 1, made durable).

For each trajectory: walk from the initial node ("sequential code"), relabel each step's method onto
the graph's techniques, optionally validate the step's code, and append the step as an example of
the transition previous technique -> this technique. A trajectory is committed in one transaction
together with a record of it, so an interrupted build resumes where it stopped, and re-ingesting the
same trajectory adds nothing (trajectory and example ids are content hashes).

Step 1 starts from the task's serial reference, read through `ReferenceSource`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from graphdb.errors import GraphDBError
from graphdb.models import (
    INITIAL_TECHNIQUE,
    Example,
    IngestBatch,
    RelabelOutcome,
    ReviewStatus,
    StepVerdict,
    Technique,
    TrajectoryRecord,
    content_id,
    utc_now,
)
from graphdb.store import ConstructionStore, IngestStore
from search.embeddings import Embedder, technique_text
from search.engine import SearchResult
from search.errors import SearchError
from search.relabel.relabeler import Relabeler, RelabelError
from search.relabel.taxonomy import Taxonomy
from search.run import verified_path

logger = logging.getLogger(__name__)

TRAJECTORY_FORMAT = "regraph.trajectory/v1"


class ConstructionError(SearchError):
    """Root of graph-construction failures."""


class TrajectoryFormatError(ConstructionError):
    """A trajectory file or line is not a valid `regraph.trajectory/v1` object."""


class ReferenceNotFoundError(ConstructionError):
    """The serial reference a trajectory starts from cannot be found."""


class GraphWriteError(ConstructionError):
    """The graph store refused or failed a trajectory's batch (nothing of it was written)."""


class TrajectoryStep(BaseModel):
    """One optimization step: the method applied, why, what changed, and the complete code after it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    method: str = Field(min_length=1, max_length=200)
    think: str = ""
    detail: str = ""
    code: str = Field(min_length=1)


class Trajectory(BaseModel):
    """An optimization trajectory for one task."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    format: Literal["regraph.trajectory/v1"]
    task_id: str = Field(pattern=r"^[a-z0-9_]+$")
    model: str = Field(min_length=1)
    steps: list[TrajectoryStep] = Field(min_length=1)

    @property
    def id(self) -> str:
        """Content hash of the whole trajectory (what makes re-ingestion a no-op)."""
        return content_id("trajectory", json.dumps(self.model_dump(), sort_keys=True))


@dataclass(frozen=True)
class SourcedTrajectory:
    """A trajectory and where it came from (a "file:line" or a teacher model's name)."""

    trajectory: Trajectory
    origin: str


def read_trajectory_file(path: Path) -> list[SourcedTrajectory]:
    """Parse every line of a JSONL file first, so a malformed line fails before anything is written."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise TrajectoryFormatError(f"{path}: cannot read: {e}") from e
    except UnicodeDecodeError as e:  # a binary or otherwise garbled file
        raise TrajectoryFormatError(
            f"{path}: not a {TRAJECTORY_FORMAT} trajectory file: not UTF-8 text (byte {e.start}: {e.reason})"
        ) from e
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            trajectory = Trajectory.model_validate_json(line)
        except ValidationError as e:
            raise TrajectoryFormatError(f"{path}:{number}: not a {TRAJECTORY_FORMAT} trajectory: {e}") from e
        out.append(SourcedTrajectory(trajectory, f"{path}:{number}"))
    return out


def read_trajectories(paths: Iterable[Path]) -> list[SourcedTrajectory]:
    """Trajectories of files and directories (every `*.jsonl` inside, sorted), all parsed up front."""
    out: list[SourcedTrajectory] = []
    for path in paths:
        files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        for file in files:
            out.extend(read_trajectory_file(file))
    return out


class ReferenceSource(Protocol):
    """The serial reference code of a task (the code step 1 starts from)."""

    def __call__(self, task_id: str) -> str: ...


class TaskDirectoryReferences:
    """References from a task directory laid out as `<root>/<task_id>/reference.cpp`."""

    def __init__(self, root: Path) -> None:
        """Read references under `root` (e.g. regraph_data/tasks)."""
        self.root = root

    def __call__(self, task_id: str) -> str:
        """The reference source of `task_id`; raises `ReferenceNotFoundError`."""
        path = self.root / task_id / "reference.cpp"
        try:
            return path.read_text()
        except OSError as e:
            raise ReferenceNotFoundError(f"no serial reference for task {task_id!r} at {path}") from e


class ReferencesInOrder:
    """The first of several reference sources that knows the task (e.g. a teacher's tasks, then a directory)."""

    def __init__(self, *sources: ReferenceSource) -> None:
        """Ask `sources` in this order."""
        self.sources = sources

    def __call__(self, task_id: str) -> str:
        """The reference of `task_id` from the first source that has it; raises `ReferenceNotFoundError`."""
        reasons = []
        for source in self.sources:
            try:
                return source(task_id)
            except ReferenceNotFoundError as e:
                reasons.append(str(e))
        raise ReferenceNotFoundError("; ".join(reasons) or f"no reference source for task {task_id!r}")


class StepCheck(BaseModel):
    """The validation of one step's code (as reported by the executor)."""

    passed: bool
    speedup_over_serial: float | None = Field(None, gt=0)
    device: str | None = None
    reason: str = ""


class StepValidator(Protocol):
    """Validates a step's code for a task (an executor client adapter); raises on infrastructure failure."""

    def __call__(self, task_id: str, code: str) -> StepCheck: ...


class TrajectorySource(Protocol):
    """Where trajectories come from besides files, e.g. a teacher model generating them.

    `search.relabel.teacher.TeacherTrajectorySource` prompts a `ChatModel` per task and returns the trajectories
    it writes; `GraphBuilder.build` treats them exactly like file trajectories.
    """

    def __call__(self) -> Iterable[SourcedTrajectory]: ...


ProgressCallback = Callable[[int, int, str], None]
"""Called after each trajectory with (done, total, origin)."""


class BuildSummary(BaseModel):
    """What a build did."""

    trajectories_read: int = 0
    trajectories_ingested: int = 0
    trajectories_already_ingested: int = 0
    techniques_created: int = 0
    transitions_created: int = 0
    examples_added: int = 0
    examples_skipped: int = 0
    merges: int = 0
    new_techniques: int = 0
    flagged: int = 0
    rejected_steps: int = 0
    skipped_steps: int = 0
    nodes: int = 0
    transitions: int = 0
    examples: int = 0


def step_example(
    task_id: str,
    code_before: str,
    code_after: str,
    *,
    source: tuple[str, str],
    target: tuple[str, str],
    serial: float | None,
    previous_serial: float | None,
    **fields: Any,
) -> Example:
    """One step of a path as an example of the transition source -> target (each a (technique, label)
    pair: the graph's technique and the label the step was written with).

    The id is a content hash of the task and the code before and after, so the same step is never
    stored twice. `serial` is the step's measured speedup over the serial reference; its speedup over
    the step before is `serial / previous_serial` when both are known. `fields` are the remaining
    `Example` fields (verdict, review status, provenance...).
    """
    speedup = serial / previous_serial if serial is not None and previous_serial is not None else None
    return Example(
        id=content_id("example", task_id, code_before, code_after),
        source=source[0],
        target=target[0],
        task_id=task_id,
        code_before=code_before,
        code_after=code_after,
        source_label=source[1],
        target_label=target[1],
        speedup=speedup,
        speedup_over_serial=serial,
        created_at=utc_now(),
        **fields,
    )


def with_code_embeddings(
    examples: list[Example], embed_code: Callable[[list[str]], list[list[float]]]
) -> list[Example]:
    """The examples with the embedding of their code before (what retrieval compares), in one call."""
    vectors = embed_code([e.code_before for e in examples])
    return [e.model_copy(update={"code_embedding": v}) for e, v in zip(examples, vectors, strict=True)]


# A step this many times faster than its parent GPU version enters the graph held for a curator (the
# first port from serial code legitimately reaches 100-1,000x: the executor's physical floor judges it).
HOLD_SPEEDUP = 20.0


class HoldSettings(BaseSettings):
    """When an improvement offered to the graph is held for a curator (issue 33): pending, listed first
    in the review queue with its reason, and used by neither retrieval nor the search's priors until
    approved. Environment: ``REGRAPH_HOLD_SPEEDUP``, ``REGRAPH_HOLD_DISTRIBUTION_FACTOR``,
    ``REGRAPH_HOLD_DISTRIBUTION_MIN_EXAMPLES``."""

    model_config = SettingsConfigDict(env_prefix="REGRAPH_HOLD_", extra="ignore")

    speedup: float = Field(
        default=HOLD_SPEEDUP,
        gt=1.0,
        description="a step faster than this over its parent GPU version is held",
    )
    distribution_factor: float = Field(
        default=5.0,
        gt=1.0,
        description="a step faster than this many times the 95th percentile of its transition's verified "
        "examples is held",
    )
    distribution_min_examples: int = Field(
        default=5,
        ge=1,
        description="verified examples a transition needs before its distribution holds a step",
    )


def hold_reason(speedup_over_parent: float | None, parent_is_gpu: bool, limit: float = HOLD_SPEEDUP) -> str:
    """Why a step is held for a curator before retrieval and the search's priors may use it ('' when it
    is not): its speedup over its parent GPU version is beyond ``limit`` (issue 33)."""
    if not parent_is_gpu or speedup_over_parent is None or speedup_over_parent <= limit:
        return ""
    return (
        f"held for a curator: {speedup_over_parent:.1f}x over its parent GPU version, beyond the "
        f"{limit:g}x that a step is trusted with unreviewed"
    )


def percentile_95(values: list[float]) -> float:
    """The 95th percentile of `values` (not empty), interpolated between the closest ranks as Neo4j's
    ``percentileCont`` does."""
    ordered = sorted(values)
    rank = 0.95 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def distribution_hold_reason(
    speedup: float | None, verified: list[float], factor: float, min_examples: int
) -> str:
    """Why a step is held for a curator ('' when it is not): its speedup is more than ``factor`` times the
    95th percentile of the speedups of the verified examples already on its transition, which has at
    least ``min_examples`` of them (issue 33: far beyond what the graph has seen of this step)."""
    if speedup is None or len(verified) < min_examples:
        return ""
    p95 = percentile_95(verified)
    if speedup <= factor * p95:
        return ""
    return (
        f"held for a curator: {speedup:.1f}x, beyond {factor:g} x the 95th percentile ({p95:.2f}x) of "
        f"the {len(verified)} verified examples of its transition (the distribution rule)"
    )


@dataclass
class GraphImprovements:
    """Offers the path of a verified improvement to the graph as pending examples (an `ImprovementSink`).

    Only a verified improvement is offered (best speedup > 1, every step on the path passed); curators
    review the examples before retrieval trusts them. A step the graph already holds (same task and
    code) is skipped by the store and keeps its record.
    """

    store: IngestStore
    embed_code: Callable[[list[str]], list[list[float]]]
    job_id: str
    hold: HoldSettings = field(default_factory=HoldSettings)

    def offer(self, result: SearchResult, initial_code: str) -> list[str]:
        """Add each step of the best path as a pending example; their ids. Raises `GraphWriteError`."""
        chain = verified_path(result)
        if not chain or result.best_speedup is None or result.best_speedup <= 1.0:
            return []
        if not all(c.passed and c.code is not None and c.technique is not None for c in chain):
            return []
        examples: list[Example] = []
        code_before, previous, previous_serial = initial_code, INITIAL_TECHNIQUE, 1.0
        for candidate in chain:
            assert candidate.evaluation is not None and candidate.code is not None and candidate.technique
            serial = candidate.evaluation.speedup
            verdict = candidate.evaluation.verdict()
            over_parent = serial / previous_serial if serial is not None and previous_serial else None
            held = hold_reason(over_parent, previous != INITIAL_TECHNIQUE, self.hold.speedup) or (
                distribution_hold_reason(
                    over_parent,
                    self.store.verified_speedups(previous, candidate.technique),
                    self.hold.distribution_factor,
                    self.hold.distribution_min_examples,
                )
            )
            examples.append(
                step_example(
                    result.task_id,
                    code_before,
                    candidate.code,
                    source=(previous, previous),
                    target=(candidate.technique, candidate.technique),
                    serial=serial,
                    previous_serial=previous_serial,
                    detail=f"found by a {result.method} search (job {self.job_id}, candidate #{candidate.index})",
                    verdict=StepVerdict.PASSED,
                    device=verdict.device if verdict is not None else None,
                    model=f"{candidate.backend}:{candidate.model}",
                    review_status=ReviewStatus.PENDING,
                    review_reason=held or "offered by an optimize job; awaiting review",
                    held=bool(held),
                )
            )
            code_before, previous = candidate.code, candidate.technique
            previous_serial = serial or previous_serial
        examples = with_code_embeddings(examples, self.embed_code)
        try:
            self.store.ingest(IngestBatch(examples=examples, actor=f"job:{self.job_id}"))
        except GraphDBError as e:
            raise GraphWriteError(f"the graph refused the improvement of job {self.job_id}: {e}") from e
        return [e.id for e in examples]


@dataclass
class GraphBuilder:
    """Ingests trajectories into a store: relabeling, optional validation, one transaction per trajectory."""

    store: ConstructionStore
    embedder: Embedder
    relabeler: Relabeler
    references: ReferenceSource
    validator: StepValidator | None = None
    on_failure: Literal["reject", "skip"] = "reject"
    review_status: ReviewStatus = ReviewStatus.PENDING
    actor: str = "construction"
    seed_taxonomy: Taxonomy | None = None
    """Seed a graph that has no technique yet with this taxonomy's techniques before the first trajectory."""
    _summary: BuildSummary = field(default_factory=BuildSummary)

    def build(
        self, trajectories: Iterable[SourcedTrajectory], progress: ProgressCallback | None = None
    ) -> BuildSummary:
        """Ingest `trajectories` in order and return the summary (with the graph's final size)."""
        items = list(trajectories)
        summary = BuildSummary(trajectories_read=len(items))
        self._ensure_initial()
        for done, item in enumerate(items, start=1):
            self._ingest_one(item, summary)
            if progress is not None:
                progress(done, len(items), item.origin)
        counts = self.store.counts()
        summary.nodes, summary.transitions, summary.examples = (
            counts["techniques"],
            counts["transitions"],
            counts["examples"],
        )
        return summary

    def _ensure_initial(self) -> None:
        if self.seed_taxonomy is not None:
            seed_taxonomy(self.store, self.embedder, self.seed_taxonomy, actor=self.actor)
        if self.store.find_technique_by_label(INITIAL_TECHNIQUE) is None:
            text = "the serial C++ reference every optimization path starts from"
            self.store.ingest(
                IngestBatch(
                    new_techniques=[
                        Technique(
                            name=INITIAL_TECHNIQUE,
                            description=text,
                            embedding=self.embedder.embed_one(f"{INITIAL_TECHNIQUE}: {text}"),
                            created_at=utc_now(),
                            created_by=self.actor,
                        )
                    ],
                    actor=self.actor,
                )
            )

    def _ingest_one(self, item: SourcedTrajectory, summary: BuildSummary) -> None:
        trajectory = item.trajectory
        trajectory_id = trajectory.id
        if self.store.is_trajectory_ingested(trajectory_id):
            summary.trajectories_already_ingested += 1
            return
        code_before = self.references(trajectory.task_id)
        session = self.relabeler.session()
        examples: list[Example] = []
        previous = INITIAL_TECHNIQUE
        # Speedup over serial of the code before this step (the serial reference itself: 1).
        previous_serial: float | None = 1.0
        previous_label = INITIAL_TECHNIQUE
        rejected = 0
        session.prepare(trajectory.steps)
        # Relabel every step first: a name that cannot be relabeled fails the trajectory before any
        # validation runs or anything is written.
        targets = []
        step_before = code_before
        for step in trajectory.steps:
            try:
                targets.append(
                    session.resolve(
                        step.method,
                        step.detail,
                        think=step.think,
                        code_before=step_before,
                        code_after=step.code,
                    )
                )
            except RelabelError as e:
                raise TrajectoryFormatError(
                    f"{item.origin}: {e} (nothing of this trajectory was written)"
                ) from e
            step_before = step.code
        for index, (step, target) in enumerate(zip(trajectory.steps, targets, strict=True)):
            check = self.validator(trajectory.task_id, step.code) if self.validator is not None else None
            status, verdict, reason = self.review_status, None, ""
            serial = None
            if check is not None:
                verdict = StepVerdict.PASSED if check.passed else StepVerdict.FAILED
                serial = check.speedup_over_serial if check.passed else None
                if not check.passed:
                    if self.on_failure == "skip":
                        summary.skipped_steps += len(trajectory.steps) - index
                        break
                    status, reason = ReviewStatus.REJECTED, f"validation failed: {check.reason}"
                    rejected += 1
            label = " ".join(step.method.split())
            examples.append(
                step_example(
                    trajectory.task_id,
                    code_before,
                    step.code,
                    source=(previous, previous_label),
                    target=(target, label),
                    serial=serial,
                    previous_serial=previous_serial,
                    think=step.think,
                    detail=step.detail,
                    verdict=verdict,
                    device=check.device if check else None,
                    model=trajectory.model,
                    review_status=status,
                    review_reason=reason,
                    trajectory_id=trajectory_id,
                    step_index=index,
                )
            )
            previous, previous_label, code_before = target, label, step.code
            previous_serial = serial if check is not None else previous_serial
        examples = with_code_embeddings(examples, self.embedder.embed_code)
        record = TrajectoryRecord(
            id=trajectory_id,
            task_id=trajectory.task_id,
            model=trajectory.model,
            source=item.origin,
            n_steps=len(trajectory.steps),
            n_examples_added=len(examples),
            n_rejected=rejected,
            ingested_at=utc_now(),
        )
        batch = IngestBatch(
            trajectory=record,
            new_techniques=session.new_techniques,
            aliases=session.aliases,
            decisions=session.decisions,
            examples=examples,
            actor=self.actor,
        )
        try:
            result = self.store.ingest(batch)
        except GraphDBError as e:
            raise GraphWriteError(f"{item.origin}: the graph refused the trajectory: {e}") from e
        if result.already_ingested:
            summary.trajectories_already_ingested += 1
            return
        summary.trajectories_ingested += 1
        summary.techniques_created += result.techniques_created
        summary.transitions_created += result.transitions_created
        summary.examples_added += result.examples_created
        summary.examples_skipped += result.examples_skipped
        summary.rejected_steps += rejected
        for decision in session.decisions:
            if decision.outcome is RelabelOutcome.MERGED:
                summary.merges += 1
            elif decision.outcome is RelabelOutcome.NEW:
                summary.new_techniques += 1
            # What the curator queue lists (graphdb COUNT_QUEUE): undecided names and any decision that
            # carries a flag, merged or new ones too; counting only the undecided said 0 while the
            # queue held flagged merges.
            if decision.outcome is RelabelOutcome.FLAGGED or decision.flags:
                summary.flagged += 1


def iter_sources(*sources: TrajectorySource) -> Iterator[SourcedTrajectory]:
    """Chain several trajectory sources (files read with `read_trajectories`, teacher models...)."""
    for source in sources:
        yield from source()


def seed_taxonomy(store: ConstructionStore, embedder: Embedder, taxonomy: Taxonomy, *, actor: str) -> int:
    """Create the taxonomy's techniques in a graph that has none yet (besides the initial node).

    Returns how many were created (0 when the graph already has techniques: a team's own list, or a
    graph built before, is never mixed with the taxonomy).
    """
    existing = [t for t in store.list_techniques(limit=2) if t.name != INITIAL_TECHNIQUE]
    if existing:
        return 0
    vectors = embedder.embed([technique_text(t.name, t.description) for t in taxonomy.techniques])
    now = utc_now()
    techniques = [
        Technique(
            name=t.name,
            description=t.description,
            aliases=list(t.aliases),
            embedding=vector,
            created_at=now,
            created_by=f"taxonomy {taxonomy.version}",
        )
        for t, vector in zip(taxonomy.techniques, vectors, strict=True)
    ]
    try:
        store.ingest(IngestBatch(new_techniques=techniques, actor=actor))
    except GraphDBError as e:
        raise GraphWriteError(f"the graph refused the taxonomy's techniques: {e}") from e
    logger.info(
        "graph seeded with the taxonomy", extra={"version": taxonomy.version, "techniques": len(techniques)}
    )
    return len(techniques)
