"""Labelled technique names written outside the team, as examples a name is compared with (session 32).

Issue 28: the scorer's features (similarities to a technique's labels and description, shared words)
were fitted on names the team wrote, and no threshold or second stage over them recovered what the
gates hold on names written elsewhere without adding false merges on sets it was not tuned on
(`bench.probes.relabel_loso`). What did carry over from one set of outside-written names to the others
is the names themselves: two sources that name one technique tend to write it alike ("Coalesce global
memory accesses", "Coalesced Global Memory"), and a heading that names no technique of the taxonomy in
one guide ("Multi-GPU Basics") reads like one in another ("Multi-GPU Data Distribution").

`data/examples.v1.jsonl` holds the labelled names of the development sets (`bench/probes/relabel_data/`
`general.jsonl`, `dev2.jsonl` ... `dev15.jsonl`, clear items only, each set's source and licence in its
`DEVn.md`) and of the own set's calibration half: `{"name", "technique" (a taxonomy technique, or null
for none of them), "set"}`. `python -m bench.probes.relabel_loso --write-examples` rewrites it. It never
holds an item of the outside test set (a test compares them).

The rule (`RelabelPolicy.choose`, with a taxonomy only: the examples' labels are its techniques): the
name's embedding is compared (cosine) with every example's; the nearest one decides

- a step the scorer left undecided or would create as new merges into the nearest example's technique
  when the cosine is at least `EXAMPLE_MERGE`;
- a step the scorer left undecided becomes a new technique when the nearest example names no taxonomy
  technique and the cosine is at least `EXAMPLE_NEW`.

Both thresholds come from the leave-one-set-out probe (`bench.probes.relabel_loso`,
`bench/results/relabel/2026-11-30_s32_loso.md`). Fitted on both graphs (the examples' labels are right
as often whatever the graph), it chose 0.864 and 0.76 on all 13 sets; on the full graph alone, where the
rule applies, the last right merge is at 0.889 and the first wrong one at 0.862 (a doubtful item), the
last right new technique at 0.798 and the first duplicate at 0.759: 0.864 and 0.76 stood 0.002 above a
wrong decision each, so the thresholds sit between, with margin: 0.88 and 0.79. The gates
that follow a model decision (a contrary word, a diagnostic word, another technique's identifier, a
topic heading, one word) still apply.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from search.errors import SearchError
from search.relabel.scoring import StepText, TextVectors
from search.relabel.taxonomy import Taxonomy

EXAMPLES_PATH = Path(__file__).resolve().parent / "data" / "examples.v1.jsonl"
EXAMPLE_MERGE = 0.88
"""Cosine to the nearest example at which its technique is taken (session 32; see the module docstring)."""
EXAMPLE_NEW = 0.79
"""Cosine to the nearest example that names no taxonomy technique at which a waiting step is new."""


class ExampleError(SearchError):
    """The examples file is unreadable or names a technique the taxonomy lacks."""


@dataclass(frozen=True)
class LabelledName:
    """One labelled name."""

    name: str
    technique: str | None
    """The taxonomy technique it means, or None: none of them."""
    source: str = ""


@lru_cache(maxsize=8192)
def example_text(name: str) -> str:
    """What an example (and a step's name) is embedded as: the scorer's embedded name."""
    return StepText(name).embedded_name()


EXAMPLES_FORMAT = "regraph.relabel-examples/v1"


def read_examples(path: Path = EXAMPLES_PATH) -> tuple[str, list[LabelledName]]:
    """The taxonomy version the examples of `path` are labelled against, and the examples (the first
    line is a header: `{"format": EXAMPLES_FORMAT, "taxonomy": version}`)."""
    out = []
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        header = json.loads(lines[0]) if lines else {}
    except (OSError, json.JSONDecodeError) as e:
        raise ExampleError(f"cannot read the relabel examples {path}: {e}") from e
    if not isinstance(header, dict) or header.get("format") != EXAMPLES_FORMAT:
        raise ExampleError(
            f"{path}: the first line must be the header {{'format': {EXAMPLES_FORMAT!r}, ...}}"
        )
    for n, line in enumerate(lines[1:], 2):
        try:
            row = json.loads(line)
            technique = row["technique"]
            if not isinstance(row["name"], str) or not (technique is None or isinstance(technique, str)):
                raise TypeError("name must be a string, technique a string or null")
            out.append(LabelledName(row["name"], technique, str(row.get("set", ""))))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ExampleError(f"{path}:{n}: not an example: {e}") from e
    return str(header.get("taxonomy", "")), out


def write_examples(
    examples: Sequence[LabelledName], taxonomy_version: str, path: Path = EXAMPLES_PATH
) -> None:
    """Write `examples` (with the header) to `path`."""
    lines = [json.dumps({"format": EXAMPLES_FORMAT, "taxonomy": taxonomy_version})]
    lines += [
        json.dumps({"name": e.name, "technique": e.technique, "set": e.source}, ensure_ascii=False)
        for e in examples
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


_PACKAGED: dict[int, tuple[Any, dict[str, Any]]] = {}


def _packaged_for(embedder: Any) -> dict[str, Any]:
    """The packaged vectors for `embedder` (read once per embedder and process)."""
    from search.relabel.packaged_vectors import read_packaged_vectors

    got = _PACKAGED.get(id(embedder))
    if got is None or got[0] is not embedder:
        got = _PACKAGED[id(embedder)] = (embedder, read_packaged_vectors(embedder))
    return got[1]


class ExampleBank:
    """Examples with their unit vectors; `nearest` finds the one closest to a name."""

    def __init__(self, examples: Sequence[LabelledName], vectors: TextVectors, taxonomy: Taxonomy) -> None:
        names = {t.name for t in taxonomy.techniques}
        unknown = sorted({e.technique for e in examples if e.technique is not None} - names)
        if unknown:
            raise ExampleError(f"examples name techniques the taxonomy lacks: {unknown[:5]}")
        self.examples = tuple(examples)
        texts = [example_text(e.name) for e in self.examples]
        missing = vectors.missing(texts)
        if missing:
            # the packaged examples' vectors ship with the taxonomy's (`packaged_vectors`): a cache that
            # did not start from them (a benchmark's own) takes them rather than embedding ~850 names
            packaged = _packaged_for(vectors.embedder)
            vectors.add({t: packaged[t] for t in missing if t in packaged})
        vectors.ensure(texts)
        matrix = np.stack([vectors.get(t) for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        self.matrix = np.asarray(matrix / np.maximum(norms, 1e-12), dtype=np.float32)

    def nearest(self, vector: np.ndarray[Any, Any]) -> tuple[LabelledName, float] | None:
        """The example nearest to `vector` (a name's embedding) and its cosine."""
        if not len(self.examples):
            return None
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:
            return None
        sims = self.matrix @ (np.asarray(vector, dtype=np.float32) / norm)
        i = int(np.argmax(sims))
        return self.examples[i], float(sims[i])
