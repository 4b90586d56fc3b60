"""A learned linear adapter on MiniLM's vectors, held out one development set at a time (issue 28)

    python -m bench.probes.relabel_adapter --vector-cache /tmp/rl36/vc.npz --out OUT.md [--rule]

Results: `bench/results/relabel/2026-12-01_s35_adapter.md`.

Hypothesis (session 35): a 384x384 matrix W near the identity, learned on name -> technique pairs,
moves paraphrases toward their technique, so the right technique is the nearest more often and the
relabel rule merges more of them. Variants (`VARIANTS`):

- *ridge*: name side only, closed form: W = argmin sum ||W n - c||^2 + lam ||W - I||^2, n a step's
  name (or "name: detail") vector, c its technique's unit mean label vector (or its description's).
- *softmax-name* / *softmax-both*: W trained (torch, L-BFGS, one thread) with a softmax over the full
  graph's techniques of the scorer's blend (0.5 x best label cosine of the name + 0.5 x the "name:
  detail" cosine to the description, `scoring.CandidateIndex.features`) at temperature `TAU`, plus
  lam ||W - I||^2; W applied to the step's vectors only, or to every text (steps and techniques).

Training pairs: the clear items of the development sets (`relabel_loso.DEV_SETS`) whose technique is in
the full graph, and the own set's calibration half. For each held-out set X, lam is chosen on the other
14 sets only (an inner split of them into `INNER` groups, trained on the rest of the 14 + own
calibration, judged by how often the right technique is nearest; ties to the larger lam), then W is
trained on the 14 + own calibration and X judged. The own set is judged on its test half. The outside
set is never read (`relabel_gate_audit.load_dev_set` refuses it).

`--rule` also decides each held-out set with the vectors passed through its fold's W, and the own test
half through a W trained on all 15 sets and the own calibration half (`relabel_loso.collect`, committed
choice model and gates, no labelled examples), on the full and bare graphs. With W = I (`--variants
ridge --lam 1e9`) it reproduces `relabel_loso`'s "as is" row. `--recalibrate`: W trained on the
development sets only, and the choice model refitted per fold on the own calibration half with the
fold's W (`relabel_bench.fit`); with W = I it reproduces session 34's "MiniLM, recalibrated" row.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.probes.relabel_bench import Item, cached_vectors, load_items, scenarios
from bench.probes.relabel_gate_audit import load_dev_set
from bench.probes.relabel_loso import DEV_SETS, HeldOutTally, Record, collect
from search.embeddings import shared_embedder
from search.relabel.scoring import TextVectors, candidate_text, load_model
from search.relabel.taxonomy import default_taxonomy

Matrix = np.ndarray[Any, np.dtype[np.float64]]
TAU = 0.05
"""Softmax temperature on the blend (MiniLM's best-minus-second lead is about 0.05)."""
INNER = 3
"""Groups of the 14 training sets for choosing lam."""
LAMS: dict[str, tuple[float, ...]] = {
    "ridge": (1.0, 3.0, 10.0, 30.0, 100.0),
    "softmax-name": (0.3, 1.0, 3.0, 10.0, 30.0),
    "softmax-both": (0.3, 1.0, 3.0, 10.0, 30.0),
}


@dataclass
class Space:
    """The full graph's candidates as vectors, and every item's."""

    names: list[str]
    label_texts: list[str]
    owner: np.ndarray[Any, np.dtype[np.int64]]
    labels: Matrix
    """Unit label vectors (rows), `owner` their candidate."""
    desc_texts: list[str]
    descs: Matrix
    """Unit "name: description" vectors, one per candidate."""


@dataclass
class Pair:
    """One item as the adapter sees it."""

    source: str
    """"own" or a development set."""
    half: str
    name: Matrix
    text: Matrix
    truth: int
    """Its candidate's index, or -1 (names no technique of the full graph)."""
    doubtful: bool


def unit(x: Matrix) -> Matrix:
    """Rows scaled to unit length."""
    out: Matrix = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    return out


def space(vectors: TextVectors) -> Space:
    from search.relabel.relabeler import RelabelPolicy

    tax = default_taxonomy()
    scene = next(s for s in scenarios(tax) if s.name == "full")
    policy = RelabelPolicy(vectors.embedder, taxonomy=tax, model=load_model(), vectors=vectors, examples=[])
    candidates = policy.index(scene.techniques).candidates
    rows = [(k, label) for k, c in enumerate(candidates) for label in c.labels]
    descs = [candidate_text(c) for c in candidates]
    return Space(
        [c.name for c in candidates],
        [label for _, label in rows],
        np.array([k for k, _ in rows], dtype=np.int64),
        vectors.matrix([label for _, label in rows]).astype(np.float64),
        descs,
        vectors.matrix(descs).astype(np.float64),
    )


def pairs(vectors: TextVectors, sp: Space) -> list[Pair]:
    out = []
    sets: list[tuple[str, list[Item]]] = [("own", load_items(default_taxonomy()))]
    sets += [(s, load_dev_set(s)) for s in DEV_SETS]
    for source, items in sets:
        nv = vectors.matrix([i.step().text.embedded_name() for i in items]).astype(np.float64)
        tv = vectors.matrix([i.step().text.embedded_text() for i in items]).astype(np.float64)
        for k, item in enumerate(items):
            truth = sp.names.index(item.truth) if item.truth in sp.names else -1
            out.append(Pair(source, item.half, nv[k], tv[k], truth, item.doubtful))
    return out


# --- scoring ---------------------------------------------------------------------------------------------


def blend(sp: Space, names: Matrix, texts: Matrix, labels: Matrix, descs: Matrix) -> Matrix:
    """Per row, the scorer's blend per candidate (0.5 best label cosine + 0.5 description cosine)."""
    by_label = unit(names) @ unit(labels).T
    best = np.full((len(names), len(sp.names)), -2.0)
    for k in range(len(sp.names)):
        best[:, k] = by_label[:, sp.owner == k].max(axis=1)
    return 0.5 * best + 0.5 * unit(texts) @ unit(descs).T


def nearest_right(sp: Space, w: Matrix | None, both: bool, ps: Sequence[Pair]) -> int:
    """How many of `ps` (which must merge) have their technique nearest under `w`."""
    if not ps:
        return 0
    n = np.stack([p.name for p in ps])
    t = np.stack([p.text for p in ps])
    labels, descs = sp.labels, sp.descs
    if w is not None:
        n, t = n @ w.T, t @ w.T
        if both:
            labels, descs = labels @ w.T, descs @ w.T
    sims = blend(sp, n, t, labels, descs)
    truth = np.array([p.truth for p in ps])
    return int((sims.argmax(axis=1) == truth).sum())


# --- training --------------------------------------------------------------------------------------------


def train_ridge(sp: Space, ps: Sequence[Pair], lam: float) -> Matrix:
    """Name side only: the names toward their technique's unit mean label vector, the "name: detail"
    texts toward its description vector, one W for both (closed form)."""
    centroids = unit(np.stack([sp.labels[sp.owner == k].mean(axis=0) for k in range(len(sp.names))]))
    x = np.concatenate([np.stack([p.name for p in ps]), np.stack([p.text for p in ps])])
    y = np.concatenate([centroids[[p.truth for p in ps]], sp.descs[[p.truth for p in ps]]])
    d = x.shape[1]
    eye = np.eye(d)
    return np.linalg.solve(x.T @ x + lam * eye, x.T @ y + lam * eye).T


def train_softmax(sp: Space, ps: Sequence[Pair], lam: float, both: bool, iters: int = 60) -> Matrix:
    """W by L-BFGS on the softmax of the blend over the candidates (temperature `TAU`) + lam ||W - I||^2."""
    import torch

    torch.set_num_threads(1)
    n = torch.tensor(np.stack([p.name for p in ps]), dtype=torch.float32)
    t = torch.tensor(np.stack([p.text for p in ps]), dtype=torch.float32)
    y = torch.tensor([p.truth for p in ps], dtype=torch.int64)
    labels = torch.tensor(sp.labels, dtype=torch.float32)
    descs = torch.tensor(sp.descs, dtype=torch.float32)
    owner = torch.tensor(sp.owner)
    k = len(sp.names)
    d = n.shape[1]
    w = torch.eye(d, requires_grad=True)
    eye = torch.eye(d)
    opt = torch.optim.LBFGS([w], max_iter=iters, history_size=10, line_search_fn="strong_wolfe")

    def norm(x: Any) -> Any:
        return x / x.norm(dim=1, keepdim=True).clamp_min(1e-9)

    def closure() -> Any:
        opt.zero_grad()
        nn_, tt = norm(n @ w.T), norm(t @ w.T)
        ll, dd = (norm(labels @ w.T), norm(descs @ w.T)) if both else (labels, descs)
        by_label = nn_ @ ll.T
        best = torch.full((len(ps), k), -2.0).scatter_reduce(
            1, owner.expand(len(ps), -1), by_label, reduce="amax", include_self=True
        )
        logits = (0.5 * best + 0.5 * tt @ dd.T) / TAU
        loss = torch.nn.functional.cross_entropy(logits, y, reduction="sum") + lam * ((w - eye) ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    out: Matrix = np.asarray(w.detach().double().numpy(), dtype=np.float64)
    return out


def train(variant: str, sp: Space, ps: Sequence[Pair], lam: float) -> Matrix:
    if variant == "ridge":
        return train_ridge(sp, ps, lam)
    return train_softmax(sp, ps, lam, both=variant == "softmax-both")


OWN_TRAINS = True
"""Whether the own calibration half trains W (`--recalibrate` keeps it for the choice model)."""


def training_pairs(all_pairs: Sequence[Pair], sources: set[str]) -> list[Pair]:
    """The clear merge items of `sources` and the own calibration half (when `OWN_TRAINS`)."""
    return [
        p
        for p in all_pairs
        if p.truth >= 0
        and not p.doubtful
        and ((p.source in sources) or (OWN_TRAINS and p.source == "own" and p.half == "calibration"))
    ]


def choose_lam(variant: str, sp: Space, all_pairs: Sequence[Pair], train_sets: Sequence[str]) -> float:
    """lam by an inner split of `train_sets` into `INNER` groups (most right nearest; ties: larger)."""
    groups = [list(train_sets[i::INNER]) for i in range(INNER)]
    both = variant == "softmax-both"
    best: tuple[int, float] = (-1, 0.0)
    for lam in LAMS[variant]:
        right = 0
        for group in groups:
            rest = set(train_sets) - set(group)
            w = train(variant, sp, training_pairs(all_pairs, rest), lam)
            test = [p for p in all_pairs if p.source in group and p.truth >= 0 and not p.doubtful]
            right += nearest_right(sp, w, both, test)
        if right >= best[0]:
            best = (right, lam)
    return best[1]


@dataclass
class Fold:
    held: str
    lam: float
    w: Matrix
    right: int
    base: int
    items: int
    own_right: int
    own_base: int
    own_items: int
    scale: float
    """Mean over the held-out set's merge items of the nearest blend (W applied) / (no W)."""


def folds(variant: str, sp: Space, all_pairs: Sequence[Pair], fixed_lam: float | None) -> list[Fold]:
    both = variant == "softmax-both"
    own_test = [p for p in all_pairs if p.source == "own" and p.half == "test" and p.truth >= 0]
    out = []
    for held in DEV_SETS:
        train_sets = [s for s in DEV_SETS if s != held]
        lam = fixed_lam if fixed_lam is not None else choose_lam(variant, sp, all_pairs, train_sets)
        w = train(variant, sp, training_pairs(all_pairs, set(train_sets)), lam)
        test = [p for p in all_pairs if p.source == held and p.truth >= 0 and not p.doubtful]
        n = np.stack([p.name for p in test])
        t = np.stack([p.text for p in test])
        base_best = blend(sp, n, t, sp.labels, sp.descs).max(axis=1).mean()
        lw, dw = (sp.labels @ w.T, sp.descs @ w.T) if both else (sp.labels, sp.descs)
        w_best = blend(sp, n @ w.T, t @ w.T, lw, dw).max(axis=1).mean()
        out.append(
            Fold(
                held,
                lam,
                w,
                nearest_right(sp, w, both, test),
                nearest_right(sp, None, both, test),
                len(test),
                nearest_right(sp, w, both, own_test),
                nearest_right(sp, None, both, own_test),
                len(own_test),
                float(w_best / base_best),
            )
        )
        print(f"  {variant} {held}: lam {lam}, {out[-1].right}/{len(test)} (base {out[-1].base})", flush=True)
    return out


# --- through the relabel rule ----------------------------------------------------------------------------


class AdaptedVectors(TextVectors):
    """`raw`'s vectors through W (unit again): every text (`steps` None) or only `steps`."""

    def __init__(self, raw: TextVectors, w: Matrix, steps: set[str] | None) -> None:
        super().__init__(raw.embedder)
        self.raw = raw
        self.w = w.astype(np.float32)
        self.steps = steps

    def _through(self, text: str, v: Any) -> Any:
        if self.steps is not None and text not in self.steps:
            return np.asarray(v, dtype=np.float32)
        out = self.w @ np.asarray(v, dtype=np.float32)
        return (out / max(float(np.linalg.norm(out)), 1e-12)).astype(np.float32)

    def ensure(self, texts: Sequence[str]) -> None:
        missing = self.missing(list(texts))
        if not missing:
            return
        self.raw.ensure(missing)
        self.add({t: self._through(t, self.raw.get(t)) for t in missing})


def step_texts(items: Sequence[Item]) -> set[str]:
    return {t for i in items for t in (i.step().text.embedded_name(), i.step().text.embedded_text())}


def rule(
    variant: str, raw: TextVectors, fs: Sequence[Fold], w_all: Matrix, recalibrate: bool
) -> list[Record]:
    """Each held-out set decided with its fold's W, and the own test half with `w_all` (trained on all
    15 sets and the own calibration half: the W one would commit). `recalibrate`: the choice model
    refitted, and its thresholds chosen, on the own calibration half with the fold's W
    (`relabel_bench.fit`, what `relabel_bench --calibrate` does); W must not have seen that half."""
    from bench.probes.relabel_bench import fit

    everything = load_items(default_taxonomy())
    own = [i for i in everything if i.half == "test"]
    adapted: list[Record] = []

    def vectors_for(w: Matrix, items: Sequence[Item]) -> AdaptedVectors:
        steps = None if variant == "softmax-both" else step_texts([*items, *everything])
        return AdaptedVectors(raw, w, steps)

    for fold in fs:
        items = load_dev_set(fold.held)
        vectors = vectors_for(fold.w, items)
        model = fit(everything, vectors, default_taxonomy()) if recalibrate else None
        adapted += collect(vectors, model, sets=[(fold.held, items)])
        print(f"  rule {variant} {fold.held}", flush=True)
    vectors = vectors_for(w_all, own)
    model = fit(everything, vectors, default_taxonomy()) if recalibrate else None
    adapted += collect(vectors, model, sets=[("own", own)])
    return adapted


def tallies(records: Sequence[Record]) -> dict[str, HeldOutTally]:
    out: dict[str, HeldOutTally] = {}
    for r in records:
        kind = "own" if r.source == "own" else "doubtful" if r.doubtful else "clear"
        key = f"{kind} {r.graph}"
        out.setdefault(key, HeldOutTally()).add(r, r.verdict)
    return out


def rule_row(label: str, records: Sequence[Record]) -> str:
    t = tallies(records)

    def own(graph: str) -> str:
        return t.get(f"own {graph}", HeldOutTally()).cell()

    return (
        f"| {label} | {t['clear full'].cell()} | {t['clear bare'].cell()} | {t['doubtful full'].false} | "
        f"{t['doubtful bare'].false} | {own('full')} | {own('bare')} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--vector-cache", type=Path, default=None)
    parser.add_argument("--variants", default="ridge,softmax-name,softmax-both")
    parser.add_argument("--lam", type=float, default=None, help="a fixed lam (no inner choice)")
    parser.add_argument("--rule", action="store_true", help="also decide through the relabel rule")
    parser.add_argument("--base-records", type=Path, default=None, help="relabel_loso --records (as is)")
    parser.add_argument(
        "--recalibrate",
        action="store_true",
        help="W trained on the development sets only; the choice model refitted per fold on the own calibration half",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    global OWN_TRAINS
    OWN_TRAINS = not args.recalibrate
    import torch

    torch.set_num_threads(1)
    raw = cached_vectors(shared_embedder(), args.vector_cache)
    sp = space(raw)
    all_pairs = pairs(raw, sp)
    if args.vector_cache is not None:
        raw.save(args.vector_cache)
    lines = ["## Right technique nearest (full graph, clear items of each held-out set; own: test half)", ""]
    results: dict[str, list[Fold]] = {}
    for variant in args.variants.split(","):
        start = time.process_time()
        results[variant] = folds(variant, sp, all_pairs, args.lam)
        print(f"  {variant}: {time.process_time() - start:.0f} CPU-s", flush=True)
    head = "| set | items | no W | " + " | ".join(results) + " |"
    lines += [head, "| --- | ---: | ---: |" + " ---: |" * len(results)]
    for i, held in enumerate(DEV_SETS):
        f0 = next(iter(results.values()))[i]
        cells = [f"{fs[i].right} (lam {fs[i].lam:g})" for fs in results.values()]
        lines.append(f"| {held} | {f0.items} | {f0.base} | " + " | ".join(cells) + " |")
    first = next(iter(results.values()))
    lines.append(
        f"| **total** | {sum(f.items for f in first)} | {sum(f.base for f in first)} | "
        + " | ".join(str(sum(f.right for f in fs)) for fs in results.values())
        + " |"
    )
    lines.append(
        f"| own test half (sum over 15 folds) | {sum(f.own_items for f in first)} | "
        f"{sum(f.own_base for f in first)} | "
        + " | ".join(str(sum(f.own_right for f in fs)) for fs in results.values())
        + " |"
    )
    lines.append(
        "| nearest blend, W / no W (mean over folds) | | 1 | "
        + " | ".join(f"{np.mean([f.scale for f in fs]):.3f}" for fs in results.values())
        + " |"
    )
    lines.append(
        "| ||W - I||_F (mean over folds) | | 0 | "
        + " | ".join(
            f"{np.mean([np.linalg.norm(f.w - np.eye(len(f.w))) for f in fs]):.2f}" for fs in results.values()
        )
        + " |"
    )
    if args.rule:
        lines += [
            "",
            "## Through the relabel rule (committed choice model and gates; held out)",
            "",
            "| adapter | clear full | clear bare | doubtful full: false | doubtful bare: false | own test half full | own test half bare |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        if args.base_records is not None:
            import json

            base = [Record(**r) for r in json.loads(args.base_records.read_text())]
            halves = {i.id: i.half for i in load_items(default_taxonomy())}
            base = [r for r in base if r.source != "own" or halves[r.id] == "test"]
            lines.append(rule_row("no W (relabel_loso records)", base))
        for variant, fs in results.items():
            lam = args.lam if args.lam is not None else choose_lam(variant, sp, all_pairs, list(DEV_SETS))
            w_all = train(variant, sp, training_pairs(all_pairs, set(DEV_SETS)), lam)
            lines.append(
                rule_row(f"{variant} (own: lam {lam:g})", rule(variant, raw, fs, w_all, args.recalibrate))
            )
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
