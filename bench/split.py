"""The graph-building / held-out evaluation split of the benchmark tasks, and its leakage check.

The split is deterministic for a seed, about 70/30, and stratified by tier and domain: the number of
evaluation tasks of each tier is the tier's share of the total (largest remainders, ties broken by the
seed), and within a tier the evaluation tasks are picked one at a time from the domain furthest below
its own share (``fraction * domain size``), ties broken by a seeded random key. So every tier gets its
share to within one task, and the domains theirs as closely as the tiers allow.

Leakage: an evaluation task leaks when its id, its reference code or any of its trajectory steps'
code appears among what the graph is built from (the building tasks' trajectories, the references
their first steps start from, and the task ids those trajectories name). "Appears" means equal after
collapsing whitespace, or a near duplicate: Jaccard similarity >= 0.9 of the sets of 5-token
shingles. Tasks that are near duplicates of one another are kept together on the building side when
the split is made, so a fresh split is leak-free by construction; `check_split` verifies it again on
the files as they are now.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from bench.metrics import TIERS, BenchError, MetricsError, Tier, tier_for_steps
from regraph_data import TASKS_DIR
from search.relabel.construction import ConstructionError, read_trajectory_file

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TASKS_DIR = TASKS_DIR
DEFAULT_TRAJECTORIES_DIR = REPO_ROOT / "bench" / "trajectories"
DEFAULT_SPLIT_PATH = REPO_ROOT / "bench" / "split.json"

SPLIT_FORMAT: Literal["regraph.split/v1"] = "regraph.split/v1"
DEFAULT_SEED = 2026
DEFAULT_EVAL_FRACTION = 0.3
NEAR_DUPLICATE_JACCARD = 0.9
SHINGLE_TOKENS = 5

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|\d+(?:\.\d+)?|\S")
_SPACE = re.compile(r"\s+")


class SplitError(BenchError):
    """The split cannot be made, read or trusted."""


class StaleSplitError(SplitError):
    """The split file does not describe the task set as it is now."""


class LeakageError(SplitError):
    """Some evaluation task's id or code appears among the graph-building trajectories."""

    def __init__(self, leaks: Sequence[Leak]) -> None:
        shown = "\n".join(f"  - {leak.describe()}" for leak in leaks[:20])
        more = f"\n  ... and {len(leaks) - 20} more" if len(leaks) > 20 else ""
        super().__init__(
            f"{len(leaks)} leak(s) from the graph-building set into the evaluation set:\n{shown}{more}"
        )
        self.leaks = list(leaks)


def normalize_code(code: str) -> str:
    """Code with every run of whitespace collapsed to one space (the exact-duplicate comparison)."""
    return _SPACE.sub(" ", code).strip()


def shingles(code: str, size: int = SHINGLE_TOKENS) -> frozenset[tuple[str, ...]]:
    """The set of `size`-token windows of `code` (identifiers, numbers, single punctuation marks)."""
    tokens = _TOKEN.findall(code)
    if len(tokens) < size:
        return frozenset({tuple(tokens)}) if tokens else frozenset()
    return frozenset(tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1))


def jaccard(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> float:
    """Jaccard similarity of two shingle sets (0 when both are empty: nothing to compare)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


@dataclass(frozen=True)
class CodePiece:
    """One piece of code of a task: its reference, or one trajectory step."""

    task_id: str
    where: str
    normalized: str
    shingles: frozenset[tuple[str, ...]]

    @classmethod
    def of(cls, task_id: str, where: str, code: str) -> CodePiece:
        """Prepare `code` for comparison."""
        return cls(task_id, where, normalize_code(code), shingles(code))


@dataclass
class BenchTask:
    """A benchmark task as the split sees it: tier, domain and all the code it brings."""

    id: str
    domain: str
    steps: int
    tier: Tier
    reference: CodePiece
    step_codes: list[CodePiece] = field(default_factory=list)
    trajectory_task_ids: set[str] = field(default_factory=set)

    @property
    def pieces(self) -> list[CodePiece]:
        """The reference, then every step."""
        return [self.reference, *self.step_codes]


def load_bench_tasks(
    tasks_dir: Path = DEFAULT_TASKS_DIR, trajectories_dir: Path = DEFAULT_TRAJECTORIES_DIR
) -> tuple[list[BenchTask], dict[str, str]]:
    """Every task directory that has a task.json, a reference.cpp and a readable trajectory file.

    Returns the tasks (sorted by id) and, for directories left out, why: tasks are added while others
    work, and a half-written one must not stop the split of the rest.
    """
    if not tasks_dir.is_dir():
        raise SplitError(f"no task directory at {tasks_dir}")
    tasks: list[BenchTask] = []
    skipped: dict[str, str] = {}
    for directory in sorted(p for p in tasks_dir.iterdir() if p.is_dir()):
        name = directory.name
        try:
            meta = json.loads((directory / "task.json").read_text(encoding="utf-8"))
            task_id, domain = str(meta["id"]), str(meta.get("domain") or "unknown")
            reference = (directory / "reference.cpp").read_text(encoding="utf-8")
        except (OSError, ValueError, KeyError, TypeError) as e:
            skipped[name] = f"unreadable task: {type(e).__name__}: {e}"
            continue
        trajectory_file = trajectories_dir / f"{task_id}.jsonl"
        if not trajectory_file.is_file():
            skipped[task_id] = f"no trajectory file {trajectory_file.name}"
            continue
        try:
            trajectories = [t.trajectory for t in read_trajectory_file(trajectory_file)]
        except ConstructionError as e:
            skipped[task_id] = f"unreadable trajectory: {e}"
            continue
        if not trajectories:
            skipped[task_id] = "empty trajectory file"
            continue
        try:
            # The tier comes from the first (the teacher's) trajectory of the file.
            tier = tier_for_steps(len(trajectories[0].steps))
        except MetricsError as e:
            skipped[task_id] = str(e)
            continue
        task = BenchTask(
            id=task_id,
            domain=domain,
            steps=len(trajectories[0].steps),
            tier=tier,
            reference=CodePiece.of(task_id, "reference", reference),
        )
        for number, trajectory in enumerate(trajectories, start=1):
            task.trajectory_task_ids.add(trajectory.task_id)
            label = "" if len(trajectories) == 1 else f"trajectory {number} "
            for step_number, step in enumerate(trajectory.steps, start=1):
                task.step_codes.append(CodePiece.of(task_id, f"{label}step {step_number}", step.code))
        tasks.append(task)
    for task_id, reason in skipped.items():
        logger.warning("task %s left out of the split: %s", task_id, reason)
    return tasks, skipped


class Leak(BaseModel):
    """One way an evaluation task is visible in the graph-building set."""

    eval_task: str
    eval_where: str = Field(description='"id", "reference" or "step N"')
    build_task: str
    build_where: str
    kind: Literal["task_id", "exact", "near_duplicate"]
    similarity: float | None = None

    def describe(self) -> str:
        """One line for people."""
        if self.kind == "task_id":
            return f"evaluation task {self.eval_task!r} is named by {self.build_task!r}'s trajectory"
        how = (
            "identical to" if self.kind == "exact" else f"a near duplicate (Jaccard {self.similarity:.3f}) of"
        )
        return (
            f"{self.eval_task} {self.eval_where} is {how} {self.build_task} {self.build_where} "
            "(graph-building set)"
        )


def _similar(
    a: CodePiece, b: CodePiece, threshold: float
) -> tuple[Literal["exact", "near_duplicate"], float] | None:
    if a.normalized == b.normalized:
        return "exact", 1.0
    small, large = sorted((len(a.shingles), len(b.shingles)))
    # Jaccard <= |small| / |large|: skip pairs whose sizes alone rule a near duplicate out.
    if large == 0 or small / large < threshold:
        return None
    similarity = jaccard(a.shingles, b.shingles)
    return ("near_duplicate", similarity) if similarity >= threshold else None


def find_leaks(
    build: Iterable[BenchTask], evaluation: Iterable[BenchTask], threshold: float = NEAR_DUPLICATE_JACCARD
) -> list[Leak]:
    """Every way an evaluation task's id or code appears among the building tasks (see the module doc)."""
    build_tasks = list(build)
    leaks: list[Leak] = []
    for task in evaluation:
        for other in build_tasks:
            if task.id in other.trajectory_task_ids or task.id == other.id:
                leaks.append(
                    Leak(
                        eval_task=task.id,
                        eval_where="id",
                        build_task=other.id,
                        build_where="trajectory",
                        kind="task_id",
                    )
                )
            for mine in task.pieces:
                for theirs in other.pieces:
                    found = _similar(mine, theirs, threshold)
                    if found is not None:
                        leaks.append(
                            Leak(
                                eval_task=task.id,
                                eval_where=mine.where,
                                build_task=other.id,
                                build_where=theirs.where,
                                kind=found[0],
                                similarity=round(found[1], 4),
                            )
                        )
    return leaks


def _related_groups(tasks: Sequence[BenchTask], threshold: float) -> list[list[str]]:
    """Tasks that would leak into one another, grouped (union-find); singletons included."""
    parent = {t.id: t.id for t in tasks}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, a in enumerate(tasks):
        for b in tasks[i + 1 :]:
            if find_leaks([b], [a], threshold) or find_leaks([a], [b], threshold):
                parent[root(a.id)] = root(b.id)
    groups: dict[str, list[str]] = {}
    for t in tasks:
        groups.setdefault(root(t.id), []).append(t.id)
    return sorted(sorted(g) for g in groups.values())


class SplitTask(BaseModel):
    """One task's place in the split."""

    tier: Tier
    domain: str
    steps: int
    split: Literal["build", "eval"]


class SideCounts(BaseModel):
    """How many tasks of a stratum are on each side."""

    build: int = 0
    eval: int = 0


class SplitCounts(BaseModel):
    """Totals of the split."""

    total: int
    build: int
    eval: int
    by_tier: dict[str, SideCounts]
    by_domain: dict[str, SideCounts]


class Split(BaseModel):
    """The content of ``bench/split.json``."""

    format: Literal["regraph.split/v1"] = SPLIT_FORMAT
    seed: int
    eval_fraction: float = Field(gt=0, lt=1)
    near_duplicate_jaccard: float = NEAR_DUPLICATE_JACCARD
    shingle_tokens: int = SHINGLE_TOKENS
    task_set: str = Field(description="hash of the ids, tiers and domains the split was made from")
    counts: SplitCounts
    build: list[str]
    eval: list[str]
    kept_together: list[list[str]] = Field(
        default_factory=list, description="near-duplicate tasks kept on the building side together"
    )
    skipped: dict[str, str] = Field(default_factory=dict, description="task directories left out, and why")
    tasks: dict[str, SplitTask]


def task_set_fingerprint(tasks: Iterable[BenchTask]) -> str:
    """A hash of what the split depends on: each task's id, tier and domain."""
    rows = sorted(f"{t.id}|{t.tier}|{t.domain}" for t in tasks)
    return "sha256:" + hashlib.sha256("\n".join(rows).encode()).hexdigest()


def _counts(tasks: Sequence[BenchTask], eval_ids: set[str]) -> SplitCounts:
    by_tier = {tier: SideCounts() for tier in TIERS}
    by_domain: dict[str, SideCounts] = {}
    for t in tasks:
        for bucket in (by_tier[t.tier], by_domain.setdefault(t.domain, SideCounts())):
            if t.id in eval_ids:
                bucket.eval += 1
            else:
                bucket.build += 1
    return SplitCounts(
        total=len(tasks),
        build=len(tasks) - len(eval_ids),
        eval=len(eval_ids),
        by_tier=by_tier,
        by_domain=dict(sorted(by_domain.items())),
    )


def _apportion(sizes: dict[Tier, int], total: int, fraction: float, rng: random.Random) -> dict[Tier, int]:
    """Integer shares of `total` proportional to `sizes` (largest remainders, seeded tie-break)."""
    quotas = {k: fraction * n for k, n in sizes.items()}
    shares = {k: min(math.floor(q), sizes[k]) for k, q in quotas.items()}
    ties = {k: rng.random() for k in sorted(sizes)}
    for k in sorted(sizes, key=lambda k: (quotas[k] - shares[k], ties[k]), reverse=True):
        if sum(shares.values()) >= total:
            break
        if shares[k] < sizes[k]:
            shares[k] += 1
    return shares


def make_split(
    tasks: Sequence[BenchTask],
    *,
    seed: int = DEFAULT_SEED,
    eval_fraction: float = DEFAULT_EVAL_FRACTION,
    threshold: float = NEAR_DUPLICATE_JACCARD,
    skipped: dict[str, str] | None = None,
) -> Split:
    """Split `tasks` (see the module docstring); the result is leak-free by construction."""
    if not 0 < eval_fraction < 1:
        raise SplitError(f"the evaluation fraction must be between 0 and 1, got {eval_fraction}")
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise SplitError(f"duplicate task ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    by_id = {t.id: t for t in tasks}
    groups = _related_groups(tasks, threshold)
    together = [g for g in groups if len(g) > 1]
    candidates = [by_id[g[0]] for g in groups if len(g) == 1]
    rng = random.Random(seed)
    keys = {t.id: rng.random() for t in sorted(tasks, key=lambda t: t.id)}
    target = round(eval_fraction * len(tasks))
    tier_sizes = {tier: sum(1 for t in tasks if t.tier == tier) for tier in TIERS}
    tier_targets = _apportion(tier_sizes, target, eval_fraction, rng)
    domain_quota: dict[str, float] = {}
    for t in tasks:
        domain_quota[t.domain] = domain_quota.get(t.domain, 0.0) + eval_fraction
    eval_ids: set[str] = set()
    # The smallest tiers first: they have the fewest choices left for balancing the domains.
    for tier in sorted(TIERS, key=lambda tier: (tier_sizes[tier], TIERS.index(tier))):
        pool = [t for t in candidates if t.tier == tier]
        for _ in range(min(tier_targets[tier], len(pool))):
            pick = max(pool, key=lambda t: (domain_quota[t.domain], keys[t.id]))
            pool.remove(pick)
            domain_quota[pick.domain] -= 1.0
            eval_ids.add(pick.id)
    split = Split(
        seed=seed,
        eval_fraction=eval_fraction,
        near_duplicate_jaccard=threshold,
        task_set=task_set_fingerprint(tasks),
        counts=_counts(tasks, eval_ids),
        build=sorted(i for i in ids if i not in eval_ids),
        eval=sorted(eval_ids),
        kept_together=together,
        skipped=dict(sorted((skipped or {}).items())),
        tasks={
            t.id: SplitTask(
                tier=t.tier, domain=t.domain, steps=t.steps, split="eval" if t.id in eval_ids else "build"
            )
            for t in sorted(tasks, key=lambda t: t.id)
        },
    )
    check_leakage(split, tasks)
    return split


def check_leakage(split: Split, tasks: Sequence[BenchTask]) -> None:
    """Raise `LeakageError` listing every leak of `split` over the code of `tasks`."""
    by_id = {t.id: t for t in tasks}
    missing = sorted(i for i in [*split.build, *split.eval] if i not in by_id)
    if missing:
        raise StaleSplitError(f"the split names tasks that are not there: {', '.join(missing)}")
    leaks = find_leaks(
        [by_id[i] for i in split.build], [by_id[i] for i in split.eval], split.near_duplicate_jaccard
    )
    if leaks:
        raise LeakageError(leaks)


def check_split(split: Split, tasks: Sequence[BenchTask]) -> None:
    """The split still describes `tasks` (same ids, tiers, domains) and nothing leaks."""
    current = task_set_fingerprint(tasks)
    if current != split.task_set:
        known = set(split.tasks)
        now = {t.id for t in tasks}
        changed = sorted(
            t.id
            for t in tasks
            if t.id in known and (split.tasks[t.id].tier, split.tasks[t.id].domain) != (t.tier, t.domain)
        )
        raise StaleSplitError(
            "the task set changed since the split was made "
            f"(new: {sorted(now - known) or 'none'}; gone: {sorted(known - now) or 'none'}; "
            f"tier or domain changed: {changed or 'none'}); re-run `regraph bench split`"
        )
    check_leakage(split, tasks)


def write_split(split: Split, path: Path = DEFAULT_SPLIT_PATH) -> None:
    """Write the split as indented JSON (it is committed, so diffs should be readable)."""
    path.write_text(split.model_dump_json(indent=2) + "\n", encoding="utf-8")


def read_split(path: Path = DEFAULT_SPLIT_PATH) -> Split:
    """Read and validate a split file."""
    try:
        return Split.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SplitError(f"cannot read the split {path}: {e}") from e
    except ValidationError as e:
        raise SplitError(f"{path} is not a {SPLIT_FORMAT} split: {e}") from e
