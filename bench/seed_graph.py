"""The seed reasoning graph: built from the graph-building trajectories, committed as a JSON export.

    python -m bench.seed_graph

Starts a throwaway embedded Neo4j in a temporary directory, migrates it, and runs the real
construction pipeline (`search.relabel.construction.GraphBuilder`: the graph seeded with the packaged technique
taxonomy, all-MiniLM-L6-v2 embeddings, the relabeler of `search.relabel.relabeler.build_relabeler` with its fitted
scorer, and the `judge` model role when `REGRAPH_MODELS__JUDGE__*` is set) over the trajectories of the building tasks of `bench/split.json`,
one trajectory at a time in the split's order, recording the graph's size after each (the
convergence curve). Steps that were measured on a GPU (`--measured`, default: every teacher run
under `bench/results`, e.g. the 2026-11-22 H100 runs) carry their verdict and speedup: the
construction takes them through its `StepValidator` hook, answered from the recorded verdicts
instead of a live executor. Records of tasks that are not building tasks are never used.

Evaluation tasks never enter the graph: only building tasks' trajectories are read, the split is
checked against the task files first, and the export is checked again before it is written (task
ids, trajectory sources, the whole text for evaluation ids, and every example's code against the
evaluation tasks' references and trajectories for exact and near duplicates). Any leak is an error.

Writes into `bench/seed_graph/`: `seed_graph.json` (the export, one record per line in the store's
stable order), `convergence.csv`, `convergence.png` and `README.md`.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from bench.metrics import BenchError
from bench.runner import TeacherStepRecord
from bench.split import (
    DEFAULT_SPLIT_PATH,
    DEFAULT_TASKS_DIR,
    DEFAULT_TRAJECTORIES_DIR,
    REPO_ROOT,
    BenchTask,
    CodePiece,
    LeakageError,
    check_split,
    find_leaks,
    load_bench_tasks,
    read_split,
)
from executor.verdict import NOT_JUDGED
from graphdb.connection import scratch_store
from graphdb.errors import GraphDBError
from graphdb.models import GraphExport, RelabelOutcome, StepVerdict
from graphdb.store import ConstructionStore
from regraph_data import SEED_GRAPH_DIR
from search.backends.config import ModelRoles
from search.embeddings import Embedder, shared_embedder
from search.errors import SearchError
from search.protocols import INITIAL_TECHNIQUE
from search.relabel.construction import (
    GraphBuilder,
    SourcedTrajectory,
    StepCheck,
    TaskDirectoryReferences,
    read_trajectory_file,
)
from search.relabel.relabeler import build_relabeler
from search.relabel.taxonomy import default_taxonomy

logger = logging.getLogger(__name__)

DEFAULT_OUT_DIR = SEED_GRAPH_DIR
EXPORT_NAME = "seed_graph.json"
MEASURED_GLOB = "*/teacher_*/teacher_steps.jsonl"
"""Teacher runs under bench/results whose step verdicts are attached (those of building tasks only)."""
ACTOR = "seed-graph"
COMMAND = "python -m bench.seed_graph"


class SeedGraphError(BenchError):
    """The seed graph cannot be built or written."""


class MeasurementMismatchError(SeedGraphError):
    """Recorded GPU verdicts do not fit the trajectories (another step, a partial trajectory...)."""


class ExportLeakError(SeedGraphError):
    """The built graph names or contains an evaluation task."""


def _relative(path: Path) -> str:
    """`path` relative to the repository when inside it (so committed files name no home directory)."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


# -- inputs -----------------------------------------------------------------------------------------------


def building_trajectories(build_ids: Sequence[str], trajectories_dir: Path) -> list[SourcedTrajectory]:
    """The trajectories of the building tasks, in the given order, each tagged "file:line" (repo-relative)."""
    out: list[SourcedTrajectory] = []
    for task_id in build_ids:
        path = trajectories_dir / f"{task_id}.jsonl"
        for item in read_trajectory_file(path):
            if item.trajectory.task_id != task_id:
                raise SeedGraphError(
                    f"{item.origin}: names task {item.trajectory.task_id!r}, not {task_id!r}"
                )
            line = item.origin.rsplit(":", 1)[1]
            out.append(SourcedTrajectory(item.trajectory, f"{_relative(path)}:{line}"))
    return out


@dataclass(frozen=True)
class MeasuredStep:
    """A trajectory step's recorded GPU verdict."""

    task_id: str
    trajectory: int
    step: int
    method: str
    check: StepCheck
    source: str


class MeasuredSteps:
    """A `StepValidator` answering from verdicts recorded on a GPU (by task and exact step code)."""

    def __init__(
        self, steps: dict[tuple[str, str], MeasuredStep], skipped: Counter[str] | None = None
    ) -> None:
        """Index recorded verdicts by (task id, the step's code); `skipped`: records left out, by task."""
        self.steps = steps
        self.skipped: Counter[str] = skipped or Counter()

    def __call__(self, task_id: str, code: str) -> StepCheck:
        """The recorded check of this step; raises `MeasurementMismatchError` for a step never measured."""
        try:
            return self.steps[(task_id, code)].check
        except KeyError as e:
            raise MeasurementMismatchError(f"no recorded verdict for a step of task {task_id!r}") from e

    def covers(self, item: SourcedTrajectory) -> bool:
        """Whether every step of the trajectory has a recorded verdict (partial coverage is an error)."""
        known = [(item.trajectory.task_id, s.code) in self.steps for s in item.trajectory.steps]
        if any(known) and not all(known):
            missing = [i + 1 for i, k in enumerate(known) if not k]
            raise MeasurementMismatchError(
                f"{item.origin}: only some steps were measured (missing steps {missing}); "
                "the construction validates whole trajectories"
            )
        return all(known)

    @classmethod
    def read(
        cls, paths: Iterable[Path], trajectories: Sequence[SourcedTrajectory], eval_ids: set[str]
    ) -> MeasuredSteps:
        """Read teacher-run step records, matching each to its trajectory step by number and method name.

        Only records of tasks in `trajectories` (building tasks) are kept: a teacher run may predate
        the current split, so records of tasks that are evaluation tasks now are skipped (and counted in
        the log), never attached.
        """
        by_task: dict[str, list[SourcedTrajectory]] = {}
        for item in trajectories:
            by_task.setdefault(item.trajectory.task_id, []).append(item)
        steps: dict[tuple[str, str], MeasuredStep] = {}
        skipped: Counter[str] = Counter()
        for path in paths:
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except OSError as e:
                raise SeedGraphError(f"cannot read measured steps {path}: {e}") from e
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                where = f"{_relative(path)}:{number}"
                try:
                    record = TeacherStepRecord.model_validate_json(line)
                except ValidationError as e:
                    raise SeedGraphError(f"{where}: not a teacher step record: {e}") from e
                files = by_task.get(record.task_id)
                if files is None or record.task_id in eval_ids:
                    skipped[record.task_id] += 1
                    continue
                if record.trajectory > len(files) or record.step > len(
                    files[record.trajectory - 1].trajectory.steps
                ):
                    raise MeasurementMismatchError(
                        f"{where}: {record.task_id} has no trajectory {record.trajectory} step {record.step}"
                    )
                step = files[record.trajectory - 1].trajectory.steps[record.step - 1]
                if step.method != record.method:
                    raise MeasurementMismatchError(
                        f"{where}: step {record.step} of {record.task_id} is {step.method!r} in the "
                        f"trajectory file but {record.method!r} in the measurement"
                    )
                if record.error in NOT_JUDGED:
                    # not a verdict on the step (a batch stopped by the executor's shut-down, written by a
                    # teacher run before review 30): never a rejected example
                    raise SeedGraphError(
                        f"{where}: step {record.step} of {record.task_id} was not judged by the executor "
                        f"({record.error}: {record.message[:200]}); run the teacher run again to measure it"
                    )
                passed = record.correct is True and bool(record.verdict.get("passed"))
                device = record.verdict.get("device")
                check = StepCheck(
                    passed=passed,
                    speedup_over_serial=record.speedup if passed else None,
                    device=device if isinstance(device, str) else None,
                    reason=record.message or (record.error or ""),
                )
                earlier = steps.get((record.task_id, step.code))
                if earlier is not None:
                    # The same step measured by two runs: the first (in path order) is kept, if they agree.
                    if earlier.check.passed != check.passed:
                        raise MeasurementMismatchError(
                            f"{where} and {earlier.source} disagree on step {record.step} of {record.task_id}"
                        )
                    continue
                steps[(record.task_id, step.code)] = MeasuredStep(
                    record.task_id, record.trajectory, record.step, record.method, check, where
                )
        if skipped:
            logger.info(
                "measured steps of tasks not in the building set skipped: %s",
                ", ".join(f"{task} ({n})" for task, n in sorted(skipped.items())),
            )
        return cls(steps, skipped)


# -- building ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvergencePoint:
    """The graph's size after `trajectories` trajectories were added."""

    trajectories: int
    task_id: str
    techniques: int
    transitions: int
    examples: int
    measured: bool


def build(
    store: ConstructionStore,
    embedder: Embedder,
    trajectories: Sequence[SourcedTrajectory],
    measured: MeasuredSteps,
    tasks_dir: Path,
) -> list[ConvergencePoint]:
    """Ingest `trajectories` one at a time with the real pipeline; return the size after each."""
    relabeler = build_relabeler(store, embedder)
    references = TaskDirectoryReferences(tasks_dir)

    def builder(validator: MeasuredSteps | None) -> GraphBuilder:
        # A trajectory whose steps were all measured is validated from the records; the others are
        # ingested unvalidated (no verdict, no speedup), as `regraph graph build` does without an executor.
        return GraphBuilder(
            store=store,
            embedder=embedder,
            relabeler=relabeler,
            references=references,
            validator=validator,
            on_failure="reject",
            actor=ACTOR,
            seed_taxonomy=relabeler.policy.taxonomy,
        )

    # Building nothing creates the initial node: the curve starts from it, as every trajectory does.
    start = builder(None).build([])
    points = [ConvergencePoint(0, "", start.nodes, start.transitions, start.examples, False)]
    started = time.monotonic()
    for done, item in enumerate(trajectories, start=1):
        is_measured = measured.covers(item)
        summary = builder(measured if is_measured else None).build([item])
        if summary.trajectories_ingested != 1:
            raise SeedGraphError(f"{item.origin}: was not ingested ({summary.model_dump()})")
        points.append(
            ConvergencePoint(
                done,
                item.trajectory.task_id,
                summary.nodes,
                summary.transitions,
                summary.examples,
                is_measured,
            )
        )
        logger.info(
            "%d/%d %s: %d techniques, %d transitions, %d examples (%.0f s)",
            done,
            len(trajectories),
            item.origin,
            summary.nodes,
            summary.transitions,
            summary.examples,
            time.monotonic() - started,
        )
    return points


# -- checks --------------------------------------------------------------------------------------------


def check_no_leakage(
    export: GraphExport, text: str, build_ids: set[str], eval_tasks: Sequence[BenchTask], threshold: float
) -> None:
    """Raise `ExportLeakError` if anything of an evaluation task is in the export."""
    eval_ids = {t.id for t in eval_tasks}
    problems: list[str] = []
    for example in export.examples:
        if example.task_id not in build_ids:
            problems.append(f"example {example.id} is of task {example.task_id!r}, not a building task")
    for record in export.trajectories:
        if record.task_id not in build_ids:
            problems.append(f"trajectory {record.id} is of task {record.task_id!r}, not a building task")
        source_task = Path(record.source.rsplit(":", 1)[0]).stem
        if source_task not in build_ids:
            problems.append(
                f"trajectory {record.id} was read from {record.source}, not a building task's file"
            )
    for task_id in sorted(eval_ids):
        # Word boundaries: "gemm_f32" must not match inside "batched_gemm_f32" and the like.
        if re.search(rf"(?<![A-Za-z0-9_]){re.escape(task_id)}(?![A-Za-z0-9_])", text):
            problems.append(f"the export's text names evaluation task {task_id!r}")
    by_task: dict[str, BenchTask] = {}
    for example in export.examples:
        task = by_task.get(example.task_id)
        if task is None:
            task = by_task[example.task_id] = BenchTask(
                id=example.task_id,
                domain="",
                steps=0,
                tier="easy",
                reference=CodePiece.of(example.task_id, "export: first code_before", example.code_before),
            )
        task.step_codes.append(
            CodePiece.of(example.task_id, f"export example {example.id}", example.code_after)
        )
        task.step_codes.append(
            CodePiece.of(example.task_id, f"export example {example.id} (before)", example.code_before)
        )
    problems.extend(leak.describe() for leak in find_leaks(by_task.values(), eval_tasks, threshold))
    if problems:
        shown = "\n".join(f"  - {p}" for p in problems[:20])
        raise ExportLeakError(f"{len(problems)} evaluation-task leak(s) in the seed graph:\n{shown}")


# -- outputs -------------------------------------------------------------------------------------------


def export_text(export: GraphExport) -> str:
    """The export as JSON with one record per line (diffs stay readable; the order is the store's)."""
    document = export.model_dump(mode="json")
    parts = []
    for key, value in document.items():
        if isinstance(value, list):
            records = ",\n".join(json.dumps(v, sort_keys=True, ensure_ascii=False) for v in value)
            rendered = f"[\n{records}\n]" if value else "[]"
        else:
            rendered = json.dumps(value, ensure_ascii=False)
        parts.append(f"{json.dumps(key)}: {rendered}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def write_convergence_csv(points: Sequence[ConvergencePoint], path: Path) -> None:
    """One row per trajectory added (row 0: the initial node only)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["trajectories", "task_id", "techniques", "transitions", "examples", "measured"])
        for p in points:
            writer.writerow(
                [p.trajectories, p.task_id, p.techniques, p.transitions, p.examples, int(p.measured)]
            )


def plot_convergence(points: Sequence[ConvergencePoint], path: Path) -> None:
    """Techniques and transitions against trajectories added, as in the paper's convergence figure."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise SeedGraphError(f"matplotlib is needed for the convergence plot: {e}") from e
    x = [p.trajectories for p in points]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for axis, values, title, color in (
        (left, [p.techniques for p in points], "techniques (nodes)", "tab:blue"),
        (right, [p.transitions for p in points], "transitions (edges)", "tab:orange"),
    ):
        axis.step(x, values, where="post", color=color)
        axis.plot(x, values, "o", color=color, markersize=2.5)
        axis.set_xlabel("building trajectories added")
        axis.set_ylabel(title)
        axis.set_title(f"{title}: {values[-1]}")
        axis.set_xlim(0, max(x))
        axis.set_ylim(0, None)
        axis.grid(alpha=0.3)
    fig.suptitle("Seed reasoning graph: growth as trajectories are added (split order)")
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _judge_name() -> str | None:
    """The judge model of the environment's `judge` role, if one is set (named in the README)."""
    role = ModelRoles().judge
    return None if role is None else f"{role.backend}:{role.model or role.replay_path}"


def readme_text(
    export: GraphExport,
    points: Sequence[ConvergencePoint],
    measured: MeasuredSteps,
    measured_paths: Sequence[Path],
    command: str,
    eval_count: int,
    date: str,
    split_seed: int,
    task_set: str,
    judge: str | None = None,
) -> str:
    """The README of the seed graph: size, techniques, relabel decisions, convergence, provenance."""
    examples_by_target = Counter(e.target for e in export.examples)
    out_degree = Counter(t.source for t in export.transitions)
    measured_examples = [e for e in export.examples if e.verdict is not None]
    passed = [e for e in measured_examples if e.verdict is StepVerdict.PASSED]
    outcomes = Counter(d.outcome for d in export.decisions)
    last = points[-1]
    tail = points[max(0, len(points) - 11)]
    taxonomy = default_taxonomy()
    taxonomy_note = f"{len(taxonomy.techniques)} techniques, version {taxonomy.version}"
    judge_note = "judge: " + (judge or "none, undecided names wait in the curator queue")
    lines = [
        "# The seed reasoning graph",
        "",
        "The graph `regraph up` loads into a database that has no techniques yet (setting",
        "`REGRAPH_SEED_GRAPH`: a path to another export, or empty / `none` to start with an empty graph).",
        "It is built by the real construction pipeline: the packaged technique taxonomy",
        f"({taxonomy_note}) seeds the empty graph, then every step is relabeled by the",
        f"fitted scorer (all-MiniLM-L6-v2 embeddings, code evidence; {judge_note}; see docs/search.md)",
        "from the trajectories of the",
        f"{len({t.task_id for t in export.trajectories})} graph-building tasks of `bench/split.json`; none of its "
        f"{eval_count} evaluation",
        "tasks is in it (checked on every build: task ids, trajectory files, the text, and exact or",
        "near-duplicate code against the evaluation tasks' references and trajectories).",
        "",
        f"- command: `{command}` (from the repository root)",
        f"- split: `bench/split.json` seed {split_seed}, task set `{task_set}`",
        f"- built: {date}",
        "- files: `seed_graph.json` (a `regraph.graph/v1` export, one record per line; load it by hand with",
        "  `regraph graph import regraph_data/seed_graph/seed_graph.json`), `convergence.csv`, `convergence.png`",
        "",
        "## Size",
        "",
        "| | count |",
        "| --- | ---: |",
        f"| techniques | {len(export.techniques)} |",
        f"| transitions | {len(export.transitions)} |",
        f"| examples | {len(export.examples)} |",
        f"| trajectories | {len(export.trajectories)} |",
        f"| relabel decisions | {len(export.decisions)} |",
        f"| examples with a GPU verdict | {len(measured_examples)} |",
        "",
        f"The techniques include the initial node `{INITIAL_TECHNIQUE}`. Every example is pending review",
        "(curators approve or reject them through the API); pending examples are retrieved, rejected ones",
        "are not.",
        "",
        "## Measured steps",
        "",
    ]
    if measured_examples:
        tasks = sorted({e.task_id for e in measured_examples})
        devices = sorted({e.device for e in measured_examples if e.device})
        lines += [
            f"{len(measured_examples)} examples ({len(passed)} passed) of {len(tasks)} tasks carry the verdict",
            f"and speedups measured on {', '.join(devices)}, recorded in",
            *(f"`{_relative(p)}`" for p in measured_paths),
            "(matched to trajectory steps by task, trajectory and step number, and method name). They went",
            "through the construction's step validation, the recorded verdict answering for the executor:",
            "`speedup_over_serial` is over the serial `g++ -O3` reference, `speedup` over the previous step.",
            "The other examples were not validated and carry no verdict or speedup.",
            "",
            "Records of those runs for tasks outside the building set were not used: "
            + (
                ", ".join(f"{task} ({n} steps)" for task, n in sorted(measured.skipped.items()))
                if measured.skipped
                else "none"
            )
            + ".",
            "",
            "| task | step | technique | speedup over serial | over previous step |",
            "| --- | ---: | --- | ---: | ---: |",
        ]
        for e in sorted(measured_examples, key=lambda e: (e.task_id, e.step_index or 0)):
            serial = f"{e.speedup_over_serial:.2f}" if e.speedup_over_serial else "-"
            step = f"{e.speedup:.2f}" if e.speedup else "-"
            lines.append(
                f"| {e.task_id} | {(e.step_index or 0) + 1} | {_cell(e.target)} | {serial} | {step} |"
            )
    else:
        lines.append("No example carries a GPU verdict (no recorded measurement matched a building step).")
    lines += [
        "",
        f"## Techniques ({len(export.techniques)})",
        "",
        "Examples: steps that applied the technique (examples whose transition ends at it).",
        "",
        "| technique | examples | transitions out | aliases (merged names) |",
        "| --- | ---: | ---: | --- |",
    ]
    for t in sorted(export.techniques, key=lambda t: (-examples_by_target[t.name], t.name)):
        aliases = ", ".join(t.aliases) or ""
        lines.append(
            f"| {_cell(t.name)} | {examples_by_target[t.name]} | {out_degree[t.name]} | {_cell(aliases)} |"
        )
    lines += [
        "",
        f"## Relabel decisions ({len(export.decisions)})",
        "",
        "Method names that were not already a technique's name or alias (case ignored), in build order: "
        + ", ".join(f"{outcomes[o]} {o.value}" for o in RelabelOutcome if outcomes[o])
        + ".",
        "`merged`: the name became an alias of the technique (by a normalised alias or taxonomy label,",
        "or by the scorer); `new`: a new technique (a canonical taxonomy technique the graph lacked, or",
        "the name itself); `flagged`: undecided, kept separate and waiting in the curator queue",
        "(`GET /v1/relabel-queue`). Probability: the scorer's, for rule `model`.",
        "",
        "| name in the trajectory | outcome | technique | rule | probability | flags |",
        "| --- | --- | --- | --- | ---: | --- |",
    ]
    for d in export.decisions:
        score = f"{d.score:.3f}" if d.score is not None and d.decided_by == "model" else "-"
        lines.append(
            f"| {_cell(d.candidate)} | {d.outcome.value} | {_cell(d.technique)} | {d.decided_by} | {score} "
            f"| {_cell('; '.join(d.flags))} |"
        )
    lines += [
        "",
        "## Convergence",
        "",
        "![techniques and transitions against trajectories added](convergence.png)",
        "",
        f"After all {last.trajectories} trajectories: {last.techniques} techniques, {last.transitions} "
        f"transitions, {last.examples} examples.",
        f"The last {last.trajectories - tail.trajectories} trajectories added "
        f"{last.techniques - tail.techniques} techniques and {last.transitions - tail.transitions} transitions.",
        "Trajectories are added in the split's order (task id order), starting from the initial node; the",
        "numbers after each trajectory are in `convergence.csv`.",
        "",
    ]
    return "\n".join(lines)


# -- the whole run -------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> GraphExport:
    """Build, check and write the seed graph; return the export."""
    split = read_split(args.split)
    tasks, _ = load_bench_tasks(args.tasks_dir, args.trajectories_dir)
    check_split(split, tasks)
    build_ids, eval_ids = list(split.build), set(split.eval)
    trajectories = building_trajectories(build_ids, args.trajectories_dir)
    if any(item.trajectory.task_id in eval_ids for item in trajectories):
        raise ExportLeakError("an evaluation task's trajectory was selected for building")
    measured = MeasuredSteps.read(args.measured, trajectories, eval_ids)
    logger.info(
        "building from %d trajectories of %d tasks; %d steps measured",
        len(trajectories),
        len(build_ids),
        len(measured.steps),
    )
    embedder = shared_embedder()
    with scratch_store(prefix="regraph-seed-graph-") as store:
        points = build(store, embedder, trajectories, measured, args.tasks_dir)
        export = store.export_graph()
    text = export_text(export)
    eval_tasks = [t for t in tasks if t.id in eval_ids]
    check_no_leakage(export, text, set(build_ids), eval_tasks, split.near_duplicate_jaccard)
    if GraphExport.model_validate_json(text).model_dump() != export.model_dump():
        raise SeedGraphError("the export does not read back as written")
    out: Path = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / EXPORT_NAME).write_text(text, encoding="utf-8")
    write_convergence_csv(points, out / "convergence.csv")
    plot_convergence(points, out / "convergence.png")
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    (out / "README.md").write_text(
        readme_text(
            export,
            points,
            measured,
            args.measured,
            args.command,
            len(eval_ids),
            date,
            split.seed,
            split.task_set,
            judge=_judge_name(),
        ),
        encoding="utf-8",
    )
    return export


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--split", type=Path, default=DEFAULT_SPLIT_PATH)
    parser.add_argument("--tasks-dir", type=Path, default=DEFAULT_TASKS_DIR)
    parser.add_argument("--trajectories-dir", type=Path, default=DEFAULT_TRAJECTORIES_DIR)
    parser.add_argument(
        "--measured",
        type=Path,
        nargs="*",
        default=None,
        help="teacher_steps.jsonl files of GPU runs (verdicts of building tasks' steps are attached); "
        f"default: bench/results/{MEASURED_GLOB}",
    )
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    args = parser.parse_args(argv)
    if args.measured is None:
        args.measured = sorted((REPO_ROOT / "bench" / "results").glob(MEASURED_GLOB))
    args.command = " ".join([COMMAND, *(argv if argv is not None else sys.argv[1:])])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    # The embedding model and the driver log every call at INFO; the build's own progress is enough.
    for noisy in ("search", "graphdb", "sentence_transformers", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # The migration runner's first query names properties an empty database does not know yet.
    logging.getLogger("neo4j").setLevel(logging.ERROR)
    try:
        export = run(args)
    except (BenchError, SearchError, GraphDBError, OSError) as e:
        if isinstance(e, LeakageError | ExportLeakError):
            logger.error("LEAKAGE: %s", e)
        else:
            logger.error("%s", e)
        return 1
    print(
        f"seed graph: {len(export.techniques)} techniques, {len(export.transitions)} transitions, "
        f"{len(export.examples)} examples -> {_relative(args.out_dir / EXPORT_NAME)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
