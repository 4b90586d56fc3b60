"""Containment probe: guide-style headings around a technique's own labels, with and without containment.

    python -m bench.probes.relabel_containment_probe

Each graph technique's labels (name and aliases) are put in three guide-style patterns ("Employ {label}
for performance", "Exploit {label} to maximize throughput", "Use {label} to reduce execution time") and
relabeled on the `full` and `bare` graphs of `bench.probes.relabel_bench` twice: as shipped, and with
`CandidateIndex.containment` switched off. A check of the mechanism, not an evaluation: the names are
made of the labels the relabeler already knows (the outside set measures names written by others).
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

from bench.probes.relabel_bench import scenarios
from search.embeddings import shared_embedder
from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import CandidateIndex, Containment, load_model
from search.relabel.taxonomy import default_taxonomy

PATTERNS = (
    "Employ {} for performance",
    "Exploit {} to maximize throughput",
    "Use {} to reduce execution time",
)


@contextmanager
def containment_off() -> Iterator[None]:
    """`CandidateIndex.containment` finds nothing while inside."""
    original = CandidateIndex.containment

    def nothing(self: CandidateIndex, name: str) -> Containment | None:
        return None

    CandidateIndex.containment = nothing  # type: ignore[method-assign]
    try:
        yield
    finally:
        CandidateIndex.containment = original  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    taxonomy = default_taxonomy()
    embedder = shared_embedder()
    model = load_model()
    print("| graph | names | containment | correct merges | false merges | queued | created |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for scenario in scenarios(taxonomy):
        if scenario.name == "partial":
            continue
        policy = RelabelPolicy(embedder, taxonomy=scenario.taxonomy, model=model)
        index = policy.index(scenario.techniques)
        items = [
            (t.name, pattern.format(label))
            for t in scenario.techniques
            for label in (t.name, *t.aliases)
            for pattern in PATTERNS
        ]
        for label, off in (("on", False), ("off", True)):
            counts: Counter[str] = Counter()
            with containment_off() if off else nullcontext():
                for truth, name in items:
                    choice = policy.choose(StepInput(name), index)
                    if choice.outcome == "merge":
                        counts["correct" if choice.technique == truth else "false"] += 1
                    else:
                        counts[choice.outcome] += 1
            print(
                f"| {scenario.name} | {len(items)} | {label} | {counts['correct']} | {counts['false']} "
                f"| {counts['undecided']} | {counts['new']} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
