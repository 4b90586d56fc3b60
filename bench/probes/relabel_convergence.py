"""Does a graph built from re-worded method names converge to the same techniques as the seed graph?

    python -m bench.probes.relabel_convergence [--out bench/results/relabel/convergence.md]

Relabels the building tasks' trajectories twice with the relabeler every graph-building path uses
(`build_relabeler`: the packaged taxonomy seeding the graph, the fitted scorer, no judge), trajectory by
trajectory, one `RelabelSession` each, exactly as `GraphBuilder` does (name, detail, think, the code
before and after each step): once as written (what `python -m bench.seed_graph` builds), once with
every method name re-worded by `bench.probes.reword_trajectories`. What a session creates (techniques, aliases)
is applied to an in-memory technique catalogue before the next trajectory, as the store's `ingest`
would. No Neo4j and no code embeddings are needed: relabeling reads only techniques. The check compares,
step by step, the technique each step lands on, and the sets of techniques used. It passes when every
step lands on the same technique.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from bench.probes.reword_trajectories import write_reworded
from bench.seed_graph import building_trajectories
from bench.split import DEFAULT_SPLIT_PATH, DEFAULT_TASKS_DIR, DEFAULT_TRAJECTORIES_DIR, read_split
from graphdb.models import INITIAL_TECHNIQUE, Technique, utc_now
from search.embeddings import shared_embedder
from search.relabel.construction import SourcedTrajectory, TaskDirectoryReferences
from search.relabel.relabeler import RelabelConfig, Relabeler
from search.relabel.scoring import load_model


class TechniqueCatalogue:
    """The techniques of a graph in memory: what relabeling reads (`search.relabel.relabeler.TechniqueReader`)."""

    def __init__(self, techniques: list[Technique]) -> None:
        """Start from `techniques` (e.g. the taxonomy's)."""
        self.techniques = {t.name: t for t in techniques}

    def find_technique_by_label(self, label: str) -> Technique | None:
        """The technique whose name or alias equals `label` ignoring case."""
        folded = label.lower()
        for technique in self.techniques.values():
            if technique.name.lower() == folded or any(a.lower() == folded for a in technique.aliases):
                return technique
        return None

    def list_techniques(self, *, limit: int = 100, offset: int = 0) -> list[Technique]:
        """Techniques by name."""
        return sorted(self.techniques.values(), key=lambda t: t.name)[offset : offset + limit]

    def apply(self, new: list[Technique], aliases: list[tuple[str, str]]) -> None:
        """What a trajectory's batch adds."""
        for technique in new:
            self.techniques[technique.name] = technique
        for name, alias in aliases:
            technique = self.techniques[name]
            if alias not in technique.aliases:
                self.techniques[name] = technique.model_copy(update={"aliases": [*technique.aliases, alias]})


def relabel_all(trajectories: list[SourcedTrajectory]) -> tuple[list[str], dict[str, int], float]:
    """The technique of every step, in order, the decisions by rule, and the seconds it took."""
    config = RelabelConfig()
    taxonomy = config.resolved_taxonomy()
    now = utc_now()
    catalogue = TechniqueCatalogue(
        [Technique(name=INITIAL_TECHNIQUE, created_at=now)]
        + [
            Technique(name=t.name, description=t.description, aliases=list(t.aliases), created_at=now)
            for t in (taxonomy.techniques if taxonomy is not None else ())
        ]
    )
    relabeler = Relabeler(
        catalogue, shared_embedder(), taxonomy=taxonomy, model=load_model(config.relabel_model)
    )
    references = TaskDirectoryReferences(DEFAULT_TASKS_DIR)
    targets: list[str] = []
    rules: Counter[str] = Counter()
    start = time.perf_counter()
    for item in trajectories:
        session = relabeler.session()
        session.prepare(item.trajectory.steps)
        before = references(item.trajectory.task_id)
        for step in item.trajectory.steps:
            targets.append(
                session.resolve(
                    step.method, step.detail, think=step.think, code_before=before, code_after=step.code
                )
            )
            before = step.code
        catalogue.apply(session.new_techniques, [(a.technique, a.alias) for a in session.aliases])
        rules.update(f"{d.decided_by}:{d.outcome.value}" for d in session.decisions)
    return targets, dict(rules), time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description="relabel convergence check")
    parser.add_argument("--out", type=Path, help="also write the report (markdown) here")
    args = parser.parse_args(argv)
    split = read_split(DEFAULT_SPLIT_PATH)
    original = building_trajectories(list(split.build), DEFAULT_TRAJECTORIES_DIR)
    with tempfile.TemporaryDirectory(prefix="regraph-reworded-") as tmp:
        write_reworded(Path(tmp))
        reworded = building_trajectories(list(split.build), Path(tmp))
        renamed = sum(
            a.method != b.method
            for x, y in zip(original, reworded, strict=True)
            for a, b in zip(x.trajectory.steps, y.trajectory.steps, strict=True)
        )
        steps = sum(len(x.trajectory.steps) for x in original)
        a, rules_a, seconds_a = relabel_all(original)
        b, rules_b, seconds_b = relabel_all(reworded)
    labels = [
        (item.trajectory.task_id, step.method, other.method)
        for item, changed in zip(original, reworded, strict=True)
        for step, other in zip(item.trajectory.steps, changed.trajectory.steps, strict=True)
    ]
    same = [i for i in range(len(a)) if a[i] == b[i]]
    differ = sorted(
        ((labels[i][0], labels[i][1], labels[i][2], a[i], b[i]) for i in range(len(a)) if a[i] != b[i]),
        key=lambda r: (r[3], r[4], r[0]),
    )
    techniques_a, techniques_b = set(a), set(b)
    ok = not differ and techniques_a == techniques_b
    lines = [
        f"# Relabel convergence ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        "- command: `python -m bench.probes.relabel_convergence`",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} "
        f"(shared), python {sys.version.split()[0]}",
        f"- trajectories: {len(original)} (building tasks of bench/split.json), {steps} steps, "
        f"{renamed} method names re-worded by `bench.probes.reword_trajectories`",
        "",
        "| graph | techniques used | relabel seconds | decisions (rule:outcome) |",
        "| --- | ---: | ---: | --- |",
        f"| original names | {len(techniques_a)} | {seconds_a:.0f} | {json.dumps(rules_a, sort_keys=True)} |",
        f"| re-worded names | {len(techniques_b)} | {seconds_b:.0f} | {json.dumps(rules_b, sort_keys=True)} |",
        "",
        f"Steps on the same technique in both graphs: {len(same)}/{len(a)}. "
        f"Techniques only in the original graph: {sorted(techniques_a - techniques_b) or 'none'}; "
        f"only in the re-worded graph: {sorted(techniques_b - techniques_a) or 'none'}.",
        "",
        "Converged: " + ("yes" if ok else "no"),
    ]
    if differ:
        lines += [
            "",
            "| task | name as written | re-worded | original graph | re-worded graph |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [f"| {t} | {m} | {r} | {x} | {y} |" for t, m, r, x, y in differ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
