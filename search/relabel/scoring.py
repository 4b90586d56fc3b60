"""The relabeler's scorer: how likely a step's method is a given technique, from all its evidence.

For a step (method name, detail, think, code before -> after) and a candidate technique (a graph
technique with its aliases, or a taxonomy technique the graph lacks), `candidate_features` computes:

| feature | what it measures |
| --- | --- |
| `name_sim` | best cosine between the method name and any label (name or alias) of the technique |
| `text_sim` | cosine between "name: detail" and "technique: description" |
| `lexical` | best token overlap (Jaccard of stemmed content words) with a label |
| `unexplained` | share of the name's content words found nowhere in the technique's labels or description |
| `evidence_support` | the code change introduces a signal that shows the technique, weighted by how specific the signal is (1 / number of candidates it shows) |
| `evidence_best` | no other candidate has stronger evidence support (and it has some) |
| `evidence_absent` | the technique has evidence signals and the code after the step shows none of them |
| `mentions` | the name, detail or think mentions an identifier typical of the technique |
| `rank_gap` | how far this candidate's embedding score trails the best candidate's |

A choice model (a conditional logit with a "none of them" option) turns the features of all the
candidates of one step into the probability that each is the step's technique: candidate i scores
s_i = w . x_i + b, the "none of them" option scores 0, and P(i) = exp(s_i) / (1 + sum_j exp(s_j)).
So a candidate's probability depends on how it compares with the others: a best candidate far ahead
of the rest is likely even when its own similarities are modest, and two close candidates share the
mass. Its weights and the decision thresholds are fitted on the calibration half of the relabel
benchmark (`python -m bench.probes.relabel_bench --calibrate`) and committed in
`search/relabel/data/relabel_model.v2.json`;
the rule itself (`decide`) is: merge into the best candidate when its probability is at least
`merge_threshold` and leads the runner-up by `margin`; a new technique when it is below
`new_threshold`; otherwise the step is undecided (the judge, or the curator queue).

A model may also carry a `merge_gate`, a condition a merge by score must meet besides the thresholds
(the model for a relabeler without a taxonomy has one: there a name may well be a technique the graph
lacks, and nothing but the graph's own words tells which):

- `known_words`: every content word of the name is used by some candidate's labels or description (a
  word the graph has never seen, "prefix" in "shuffle-based warp prefix sum" against a graph that only
  holds a warp reduction, may name what the graph lacks);
- `explained`: every content word of the name is used by the best candidate's own labels or description
  (its `unexplained` feature is 0: "Loop tiling without shared memory" uses "loop", which "Shared memory
  tiling" does not), or all but one word in five or more (`EXPLAINED_SHARE`, session 31b: "Reusing data
  loaded into shared memory across a block").

A step the gate stops stays undecided (the judge, or the curator queue).
"""

from __future__ import annotations

import copy
import json
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from search.embeddings import Embedder
from search.errors import SearchError
from search.relabel.evidence import CodeEvidence
from search.relabel.taxonomy import (
    WORKLOADS,
    bag_key,
    concept_tokens,
    content_tokens,
    expand_abbreviations,
    kernel_keys,
    label_key,
    matching_key,
    strip_contrasts,
    without_backend_prefix,
    workload_key,
)

FEATURES: tuple[str, ...] = (
    "name_sim",
    "text_sim",
    "lexical",
    "unexplained",
    "evidence_support",
    "evidence_best",
    "evidence_absent",
    "mentions",
    "rank_gap",
)
DEFAULT_MODEL_PATH = Path(__file__).resolve().parent / "data" / "relabel_model.v2.json"
MODEL_FORMAT = "regraph.relabel-model/v2"
"""v2: the choice model (v1, an independent logistic per candidate, is no longer read: refit)."""
MERGE_GATES: tuple[str, ...] = ("", "known_words", "explained")
MAX_DETAIL_CHARS = 160
"""Only the start of a detail is embedded (the model reads ~256 word pieces; details can be huge)."""

Vector = np.ndarray[Any, np.dtype[np.float32]]


class ScoringError(SearchError):
    """The scoring model file is missing or invalid."""


@dataclass(frozen=True)
class TechniqueCandidate:
    """A technique as the scorer sees it."""

    name: str
    description: str
    labels: tuple[str, ...]
    evidence: frozenset[str] = frozenset()
    mentions: tuple[str, ...] = ()
    in_graph: bool = True
    concept: str | None = None
    """The taxonomy technique it is (for a graph technique: the one it is linked to)."""

    def vocabulary(self) -> frozenset[str]:
        """Every content word of its labels and description (not their negated or contrastive parts:
        "instead of shared memory" in a description, or an alias "single precision instead of double",
        does not make "shared memory" or "double" its words)."""
        words: set[str] = set()
        for text in (*self.labels, self.description):
            words.update(concept_tokens(strip_contrasts(text)))
        return frozenset(words)


@dataclass(frozen=True)
class StepText:
    """What a step says about itself (its code evidence comes separately)."""

    name: str
    detail: str = ""
    think: str = ""

    def embedded_name(self) -> str:
        """The name with CUDA shorthands written out and a back end's prefix on a pass name dropped
        (`without_backend_prefix`): what the name is embedded as."""
        return expand_abbreviations(without_backend_prefix(self.name))

    def embedded_text(self) -> str:
        """ "name: detail", the detail cut to `MAX_DETAIL_CHARS`."""
        detail = " ".join(self.detail.split())[:MAX_DETAIL_CHARS]
        name = self.embedded_name()
        return f"{name}: {detail}" if detail else name


class TextVectors:
    """Embeddings by text, computed in batches and cached (labels repeat across every decision)."""

    def __init__(self, embedder: Embedder, *, max_entries: int = 50_000) -> None:
        """Cache up to `max_entries` texts (then the cache starts over)."""
        self.embedder = embedder
        self.max_entries = max_entries
        self._cache: dict[str, Vector] = {}
        self._lock = threading.Lock()

    def ensure(self, texts: Sequence[str]) -> None:
        """Embed the texts not cached yet, in one batch."""
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if not missing:
            return
        vectors = self.embedder.embed(missing)
        with self._lock:
            if len(self._cache) + len(missing) > self.max_entries:
                self._cache.clear()
            for text, vector in zip(missing, vectors, strict=True):
                self._cache[text] = np.asarray(vector, dtype=np.float32)

    def copy_of(self, texts: Sequence[str]) -> TextVectors:
        """A new cache holding only the vectors of `texts` (e.g. to time decisions on fresh steps)."""
        self.ensure(texts)
        other = TextVectors(self.embedder, max_entries=self.max_entries)
        with self._lock:
            other._cache = {t: self._cache[t] for t in texts}
        return other

    def save(self, path: Path) -> None:
        """Write the cache to an .npz file (a development aid for benchmarks)."""
        with self._lock:
            texts = list(self._cache)
            matrix = (
                np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)
            )
        np.savez(path, texts=np.asarray(texts, dtype=object), vectors=matrix)

    def load(self, path: Path) -> None:
        """Add the vectors of an .npz file written by `save`."""
        data = np.load(path, allow_pickle=True)
        with self._lock:
            for text, vector in zip(data["texts"], data["vectors"], strict=True):
                self._cache[str(text)] = np.asarray(vector, dtype=np.float32)

    def missing(self, texts: Sequence[str]) -> list[str]:
        """The texts of `texts` not cached."""
        with self._lock:
            return [t for t in texts if t not in self._cache]

    def add(self, vectors: dict[str, Vector]) -> None:
        """Add vectors computed elsewhere (by the same embedder)."""
        with self._lock:
            if len(self._cache) + len(vectors) > self.max_entries:
                self._cache.clear()
            self._cache.update(vectors)

    def get(self, text: str) -> Vector:
        """The vector of `text` (embedded now if needed)."""
        with self._lock:
            vector = self._cache.get(text)
        if vector is None:
            self.ensure([text])
            with self._lock:
                vector = self._cache[text]
        return vector

    def matrix(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """The vectors of `texts` as rows."""
        self.ensure(texts)
        return np.stack([self.get(t) for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)


_shared_vectors: dict[int, TextVectors] = {}
_shared_vectors_lock = threading.Lock()


def shared_text_vectors(embedder: Embedder) -> TextVectors:
    """The process-wide embedding cache of `embedder` (technique labels are embedded once per process),
    starting from the packaged taxonomy vectors when they are `embedder`'s (`packaged_vectors`)."""
    from search.relabel.packaged_vectors import read_packaged_vectors

    with _shared_vectors_lock:
        vectors = _shared_vectors.get(id(embedder))
        if vectors is None or vectors.embedder is not embedder:
            vectors = _shared_vectors[id(embedder)] = TextVectors(embedder)
            vectors.add(read_packaged_vectors(embedder))
        return vectors


def candidate_text(candidate: TechniqueCandidate) -> str:
    """The text a candidate is embedded from: "name: description"."""
    return f"{candidate.name}: {candidate.description}" if candidate.description else candidate.name


def mention_core(identifier: str) -> str:
    """What a step naming `identifier` is sure to write, lower case: "__shfl_down_sync" -> "shfl_down".

    Only compound identifiers are shortened: "__shared__" stays itself, since "shared" is an
    ordinary word that any step about shared memory writes.
    """
    lowered = identifier.lower()
    core = lowered.strip("_").removesuffix("_sync")
    return core if "_" in core else lowered


KIND_HEADS = frozenset({"fusion"})
"""(session 26) Head words whose qualified forms name kinds of one technique (`CandidateIndex.kind_of`):
compilers name each fusion after what it fuses (XLA's "horizontal_input_fusion", "multi_output_fusion",
"copy_fusion"), and each is the technique whose name is the head alone ("Kernel fusion"), unless the
qualifier names another technique ("time-step fusion" is Temporal blocking). Only "fusion": qualified
"parallelization" or "graph" name distributed training and data structures as often as the techniques
called so."""
KIND_WORDS = 4
"""At most this many content words in a name read as a kind (`kind_of`)."""

RARE_WORD_USERS = 2
"""A word at most this many candidates use is a telling word (`WordCoverage.rare`)."""
COMMON_LABEL_WORD_USERS = 3
"""(session 27) A name of one content word names one technique only when at most this many candidates'
labels (names and aliases) use its word (`CandidateIndex.lone_word`): "pipelining" (three: double
buffering's, the async copy's and TMA's aliases) still names double buffering by its nearest label, but
"device" (five) or "memory" (twenty) name where, not which technique."""

# Containment (`CandidateIndex.containment`): the words a guide or a write-up puts around a technique's
# name without changing which technique it is ("Employ loop unrolling for higher throughput"): general
# English and performance vocabulary, as `content_tokens` stems it ("use", "apply", "improve" are filler,
# dropped before). Not "memory", "launch" or "occupancy": those tell techniques apart.
_LEAD_WORDS = (
    "employ employing exploit exploiting leverage leveraging utilize utilizing utilise utilising adopt "
    "adopting consider considering prefer preferring enable enabling efficient efficiently effective "
    "effectively proper properly careful carefully"
)
"""Instruction words that may stand before the contained name ("Exploit ...", "Efficient ...")."""
_PURPOSE_WORDS = (
    "reduce reducing increase increasing boost boosting speed speeding accelerate accelerating maximize "
    "maximizing maximise maximising minimize minimizing minimise minimising raise raising hide hiding "
    "save saving cut cutting enhance enhancing achieve achieving gain gaining ensure ensuring help "
    "helping allow allowing higher lower faster overall peak performance throughput latency speedup "
    "efficiency runtime execution time overhead cost bandwidth utilization utilisation perf where "
    "possible whenever wherever appropriate"
)
"""Purpose words that may follow it ("... to reduce latency", "... for performance where possible"):
verbs of making faster and the generic performance nouns they take, none the name of a technique."""
_HEADING_WORDS = "strategy strategies essentials fundamentals overview"
"""(session 30) Words a guide's heading puts after the technique it presents ("Privatization Strategy",
"Tiling Strategy", "warp.sum() Essentials"): how the text presents it, not another technique. They may
follow a contained label as the purpose words do; they are not filler (session 24 found "a tiling
strategy" merged into one tiling technique when "strategy" was dropped everywhere). "Basics" is not one:
it stems to "basic", a word of Parallelization's alias "basic CUDA kernel"."""
_CONTRARY_WORDS = frozenset(
    {
        "no",
        "not",
        "non",
        "without",
        "instead",
        "rather",
        "never",
        "avoid",
        "avoiding",
        "disable",
        "disabling",
        "remove",
        "removing",
        "removed",
        "undo",
        "undoing",
        "revert",
        "reverting",
        "drop",
        "dropping",
        "replace",
        "replacing",
        "eliminate",
        "eliminating",
    }
)
"""A name with one of these is never decided by containment: "Avoid shared memory tiling" or "Loop
unrolling replaced by ..." names the technique as what was left behind."""
LEAD_WORDS = frozenset(t for w in _LEAD_WORDS.split() for t in concept_tokens(w))
PURPOSE_WORDS = frozenset(t for w in f"{_PURPOSE_WORDS} {_HEADING_WORDS}".split() for t in concept_tokens(w))
_CONTRARY_MARKER = re.compile(
    r"\b(?:get\s+rid\s+of|in\s+place\s+of|as\s+opposed\s+to|no\s+longer|"
    + "|".join(sorted(_CONTRARY_WORDS, key=len, reverse=True))
    + r")\b"
)
"""Where a name turns against what follows (`CandidateIndex.contradicted`): the contrary words and the
phrases `concept_tokens` would drop ("get rid of", "in place of")."""
_REDUCING_WORDS = (
    "avoid avoiding avoidance reduce reducing reduction reduced minimize minimizing minimization minimise "
    "minimising minimisation eliminate eliminating elimination remove removing removal fewer less free "
    "prevent preventing prevention mitigate mitigating mitigation suppress suppressing lower lowering"
)
"""Words that make a label the fight against what it names ("branch divergence reduction", "fewer
atomics"): the phrase they go with is the technique's problem, not the technique."""
_REDUCING_STEMS = frozenset(t for w in _REDUCING_WORDS.split() for t in concept_tokens(w))
_REDUCING_DROPPED = frozenset(w for w in _REDUCING_WORDS.split() if not concept_tokens(w))
"""Reducing words `concept_tokens` drops as filler ("fewer", "less"): seen in a label's raw words."""


def _reducing(label: str, phrase: set[str]) -> bool:
    """Whether `label` holds a reducing word (`_REDUCING_WORDS`) outside the words of `phrase`."""
    if (set(concept_tokens(strip_contrasts(label))) - phrase) & _REDUCING_STEMS:
        return True
    return bool(set(re.findall(r"[a-z]+", label.lower())) & _REDUCING_DROPPED)


_CONTRARY_STEMS = frozenset(t for w in _CONTRARY_WORDS for t in concept_tokens(w))
_CONTRARY_SKIP = LEAD_WORDS | frozenset(concept_tokens("than"))
"""Words between a contrary word and the phrase it turns against ("rather than", "avoid employing")."""


_DIAGNOSTIC_WORDS = (
    "profile profiled profiling profiler profilers detect detecting detection detector debug debugging "
    "debugger measure measuring measurement measurements analysis analyses analyze analyzing analyse "
    "analysing analyzer monitor monitoring trace tracing tracer instrument instrumenting instrumentation "
    "benchmark benchmarking visualize visualizing visualization visualise inspect inspecting inspection "
    "diagnose diagnosing diagnosis diagnostic diagnostics verify verifying verification validate "
    "validating validation report reporting"
)
"""Words of looking at a program rather than changing it (session 20): a name built around one names a
tool or a study of the technique ("Bank conflict detection with Nsight Compute", "Divergence
profiling"), not the technique, unless the technique's own words use it."""
DIAGNOSTIC_STEMS = frozenset(t for w in _DIAGNOSTIC_WORDS.split() for t in concept_tokens(w))
_DIAGNOSTIC_TOOLS = frozenset({"calculator", "calculators"})
"""Tools named by an agent noun whose stem is its verb's (session 29: "-ator" meets "-ate", so
"calculator" stems like "calculate", a word of changing a program): matched as written."""


_TOPIC_WORDS = frozenset(
    [
        "optimizations",
        "optimisations",
        "techniques",
        "strategies",
        "tips",
        "tricks",
        "guidelines",
        "practices",
    ]
)
"""Plural nouns that make a name a topic heading ("L2 Cache Optimizations", "Shared memory
techniques"): a section that covers several techniques, not one (session 20, issue 28)."""
_AVOID_WORDS = frozenset({"avoid", "avoiding", "avoids"})
"""A name that starts with one is advice against something ("Avoid allocating all available memory")."""


def generic_name(name: str, labels: Sequence[str], detail: str = "") -> tuple[str, ...]:
    """The words of a technique's own name that a generic name lacks, or () (`labels`: the
    technique's name first, then its aliases).

    Precision first (session 20, issue 28): a topic heading (`_TOPIC_WORDS`) whose words are all words
    of a technique's name is broader than that technique, unless it says one of its labels whole ("L2
    Cache Optimizations" is not "L2 cache persistence": the heading covers every L2 technique); an
    advice against something ("Avoid Y", `_AVOID_WORDS`) is the technique that reduces Y only when it
    names more than half of the naming words of one of its labels (a reducing word of the label,
    "reduction", "avoidance", counts as the "avoid"). Two stems of one root ("divergent", "divergence":
    six letters in common) are one word here. The step's detail may supply the missing words. Names of
    neither kind give ().
    """
    raw = re.findall(r"[a-z]+", expand_abbreviations(name).lower())
    topic = bool(set(raw) & _TOPIC_WORDS)
    avoid = bool(raw) and raw[0] in _AVOID_WORDS
    if not (topic or avoid) or not labels:
        return ()
    said = set(concept_tokens(name)) | set(concept_tokens(detail))

    def lacking(label: str) -> tuple[tuple[str, ...], int]:
        own = [t for t in dict.fromkeys(concept_tokens(label)) if not (avoid and t in _REDUCING_STEMS)]
        gone = tuple(t for t in own if t not in said and not any(t[:6] == w[:6] for w in said if len(w) >= 6))
        return gone, len(own)

    missing, _ = lacking(labels[0])
    if not missing:
        return ()
    if topic:
        if not set(concept_tokens(name)) <= set(concept_tokens(labels[0])):
            return ()
        return () if any(not lacking(label)[0] for label in labels[1:]) else missing
    named = [lacking(label) for label in labels]
    return () if any(2 * len(gone) < n for gone, n in named if n) else missing


_COMPLEMENT = re.compile(
    r"\s(?:for|with|of|in|on|at|to|via|by|using|across|within|between|from|into|onto|over|through|per|"
    r"when|where|if|instead|rather|without|than)\s",
    re.IGNORECASE,
)
"""Where a name's complement starts ("Shared memory tiling *for* stencils")."""


def head_word(name: str) -> str | None:
    """The head of a name, as `concept_tokens` reads it: its last content word before a complement
    ("backend" in "Use efficient data-parallel backend", "tiling" in "Shared memory tiling for stencils"),
    or None when it has none."""
    words = concept_tokens(_COMPLEMENT.split(f" {name} ", maxsplit=1)[0])
    return words[-1] if words else None


@dataclass(frozen=True)
class Containment:
    """A candidate whose label the name contains, with only generic words around it."""

    technique: str
    label: str
    leftover: tuple[str, ...]
    """The name's content words outside the label (all in `LEAD_WORDS` before it, `PURPOSE_WORDS` after)."""


@dataclass(frozen=True)
class WordCoverage:
    """What each candidate's labels and description use of one name's content words.

    `shares`: the share of the name's words it uses, each word weighted by how few candidates use it
    (log((n + 1) / (users + 1)); a word no candidate uses weighs most): "warp" or "memory" say little
    about which technique a name means, "shuffle" or "host" much. `rare`: how many of the words it uses
    are used by at most `RARE_WORD_USERS` candidates ("Loop blocking" uses no such word: "loop" and
    "block" are in many descriptions).
    """

    shares: dict[str, float]
    rare: dict[str, int]
    unknown: int = 0
    """How many of the name's words no candidate uses."""
    head_unknown: bool = False
    """Whether the name's head word (`head_word`) is one of them."""
    common_phrase: bool = False
    """Whether the name's other words stand together in it and are a phrase of two or more
    candidates' labels (session 22: "memory access" in "Nontemporal memory access")."""
    foreign: dict[str, int] = field(default_factory=dict)
    """(session 25) How many of the name's rare words (used by at least one and at most
    `RARE_WORD_USERS` candidates) each candidate does not use: words that point to other techniques
    ("multi-dimensional" in "Multi-dimensional parallelization" is Multidimensional thread mapping's)."""
    own_name: dict[str, int] = field(default_factory=dict)
    """(session 25) How many of the name's words are words of each candidate's own name (not only of
    an alias): "persistent" of Persistent threads, not "basic" of Parallelization's alias "basic CUDA
    kernel"."""


@dataclass
class CandidateIndex:
    """Candidates with their label vectors, ready to score many steps against."""

    candidates: list[TechniqueCandidate]
    vectors: TextVectors
    _label_rows: list[np.ndarray[Any, np.dtype[np.float32]]] = field(default_factory=list)
    _label_stack: np.ndarray[Any, np.dtype[np.float32]] | None = None
    _label_starts: np.ndarray[Any, np.dtype[np.int64]] = field(
        default_factory=lambda: np.zeros(0, dtype=np.int64)
    )
    _text_rows: np.ndarray[Any, np.dtype[np.float32]] | None = None
    _label_tokens: list[list[set[str]]] = field(default_factory=list)
    _vocab: list[frozenset[str]] = field(default_factory=list)
    _keys: dict[str, int] = field(default_factory=dict)
    _bags: dict[str, int | None] = field(default_factory=dict)
    _kernel_keys: dict[str, int] = field(default_factory=dict)
    _word_index: dict[str, int] = field(default_factory=dict)
    _label_owner: np.ndarray[Any, np.dtype[np.int64]] = field(
        default_factory=lambda: np.zeros(0, dtype=np.int64)
    )
    _label_matrix: np.ndarray[Any, np.dtype[np.float32]] = field(
        default_factory=lambda: np.zeros((0, 0), dtype=np.float32)
    )
    _label_sizes: np.ndarray[Any, np.dtype[np.float32]] = field(
        default_factory=lambda: np.zeros(0, dtype=np.float32)
    )
    _vocab_matrix: np.ndarray[Any, np.dtype[np.float32]] = field(
        default_factory=lambda: np.zeros((0, 0), dtype=np.float32)
    )
    _idf: np.ndarray[Any, np.dtype[np.float64]] = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    _mentions: list[tuple[str, ...]] = field(default_factory=list)
    _mention_set: frozenset[str] = frozenset()
    _specificity: dict[str, float] = field(default_factory=dict)
    _phrases: dict[str, list[tuple[int, tuple[str, ...], str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rebuild()

    def rebuild(self) -> None:
        """Recompute the vectors after candidates changed."""
        texts = [label for c in self.candidates for label in c.labels] + [
            candidate_text(c) for c in self.candidates
        ]
        self.vectors.ensure(texts)
        self._label_rows = [self.vectors.matrix(list(c.labels)) for c in self.candidates]
        # All label rows in one matrix, each candidate's from its start: a name's best label similarity
        # per candidate is one product and one reduce (every candidate has at least its name as label).
        self._label_stack = (
            np.concatenate(self._label_rows)
            if self._label_rows and all(len(rows) for rows in self._label_rows)
            else None
        )
        self._label_starts = np.cumsum([0] + [len(rows) for rows in self._label_rows[:-1]], dtype=np.int64)
        self._text_rows = (
            self.vectors.matrix([candidate_text(c) for c in self.candidates]) if self.candidates else None
        )
        self._label_tokens = [
            [set(concept_tokens(strip_contrasts(label))) for label in c.labels] for c in self.candidates
        ]
        self._vocab = [c.vocabulary() for c in self.candidates]
        # Token overlaps as matrix products: one row per label (and per candidate vocabulary) over the
        # words of all labels, so a step is scored against every label at once.
        words = sorted(
            {w for vocab in self._vocab for w in vocab}
            | {w for ls in self._label_tokens for t in ls for w in t}
        )
        self._word_index = {w: i for i, w in enumerate(words)}
        label_sets = [t for ls in self._label_tokens for t in ls]
        self._label_owner = np.array(
            [i for i, ls in enumerate(self._label_tokens) for _ in ls], dtype=np.int64
        )
        self._label_matrix = np.zeros((len(label_sets), len(words)), dtype=np.float32)
        for row, tokens in enumerate(label_sets):
            for word in tokens:
                self._label_matrix[row, self._word_index[word]] = 1.0
        self._label_sizes = self._label_matrix.sum(axis=1)
        self._vocab_matrix = np.zeros((len(self.candidates), len(words)), dtype=np.float32)
        for row, vocab in enumerate(self._vocab):
            for word in vocab:
                self._vocab_matrix[row, self._word_index[word]] = 1.0
        # How telling each word is: a word few candidates use says more about which one a name means.
        self._idf = np.log((len(self.candidates) + 1.0) / (self._vocab_matrix.sum(axis=0) + 1.0))
        self._mentions = [tuple(mention_core(m) for m in c.mentions) for c in self.candidates]
        self._mention_set = frozenset(m for ms in self._mentions for m in ms)
        # Each label's words in order, by its first word (`containment`).
        self._phrases = {}
        for i, candidate in enumerate(self.candidates):
            for label in candidate.labels:
                phrase = tuple(concept_tokens(strip_contrasts(label)))
                if matching_key(" ".join(phrase)) and not set(phrase) <= PURPOSE_WORDS | LEAD_WORDS:
                    self._phrases.setdefault(phrase[0], []).append((i, phrase, label))
        self._keys = {}
        counts: dict[str, int] = {}
        for candidate in self.candidates:
            for signal in candidate.evidence:
                counts[signal] = counts.get(signal, 0) + 1
        self._specificity = {signal: 1.0 / n for signal, n in counts.items()}
        self._bags = {}
        for i, candidate in enumerate(self.candidates):
            if candidate.in_graph:
                for label in candidate.labels:
                    key = label_key(label)
                    if matching_key(key):
                        self._keys.setdefault(key, i)
                    bag = bag_key(label)
                    if matching_key(bag):
                        # A bag of words two techniques share is ambiguous: matched by neither.
                        self._bags[bag] = i if self._bags.get(bag, i) == i else None
        # A workload name meets a label of "the kernel" ("Persistent GEMM", "persistent kernel"); the
        # owners' words are read over every candidate, the keys kept for graph techniques only.
        kernel = kernel_keys((str(i), label) for i, c in enumerate(self.candidates) for label in c.labels)
        self._kernel_keys = {k: int(i) for k, i in kernel.items() if self.candidates[int(i)].in_graph}

    def vocabulary_words(self) -> frozenset[str]:
        """Every stemmed content word some candidate's labels or description use."""
        return frozenset(self._word_index)

    def unknown_words(self, name: str) -> list[str]:
        """The content words of `name` that no candidate's labels or description use."""
        return [w for w in concept_tokens(name) if w not in self._word_index]

    def word_coverage(self, name: str) -> WordCoverage:
        """What each candidate's labels and description use of the name's content words (see
        `WordCoverage`)."""
        words = list(dict.fromkeys(concept_tokens(name)))
        known = [self._word_index[w] for w in words if w in self._word_index]
        n = len(self.candidates)
        if not words or not n:
            return WordCoverage({}, {})
        weights = self._idf[known] if known else np.zeros(0)
        total = float(np.sum(weights)) + math.log(n + 1.0) * (len(words) - len(known))
        covered = self._vocab_matrix[:, known] if known else np.zeros((n, 0), dtype=np.float32)
        users = covered.sum(axis=0)
        rare = covered[:, users <= RARE_WORD_USERS].sum(axis=1)
        telling = covered[:, (users >= 1) & (users <= RARE_WORD_USERS)]
        foreign = telling.shape[1] - telling.sum(axis=1)
        shares = covered @ weights / total if total > 0.0 else np.zeros(n)
        head = head_word(name)
        return WordCoverage(
            {c.name: float(v) for c, v in zip(self.candidates, shares, strict=True)},
            {c.name: int(v) for c, v in zip(self.candidates, rare, strict=True)},
            len(words) - len(known),
            head is not None and head not in self._word_index,
            # a contrary word ("Not using pinned memory") is the contrary rule's (`contradicted`)
            any(w not in self._word_index and w not in _CONTRARY_STEMS for w in words)
            and self._phrase_owners([w for w in concept_tokens(name) if w not in _CONTRARY_STEMS]) >= 2,
            {c.name: int(v) for c, v in zip(self.candidates, foreign, strict=True)},
            {
                c.name: len(set(words) & labels[0]) if labels else 0
                for c, labels in zip(self.candidates, self._label_tokens, strict=True)
            },
        )

    def _phrase_owners(self, words: list[str]) -> int:
        """How many candidates hold, in one of their labels, the run of `words` that candidates know
        (0 when the known words do not stand together, or there are none; `words` must hold an unknown
        word)."""
        flags = [w in self._word_index for w in words]
        if True not in flags:
            return 0
        first = flags.index(True)
        last = len(flags) - flags[::-1].index(True)
        if not all(flags[first:last]):
            return 0
        run = tuple(words[first:last])
        owners = {
            owner
            for phrases in self._phrases.values()
            for owner, phrase, _ in phrases
            if any(phrase[i : i + len(run)] == run for i in range(len(phrase) - len(run) + 1))
        }
        return len(owners)

    def named(self, name: str) -> dict[str, str]:
        """The candidates an identifier the name itself writes belongs to (`mention_core` of their
        `mentions`: "warp.sum()" names the warp shuffle reduction's `warp.sum`), each with the identifier;
        negated mentions ("instead of __ldg") do not count (`strip_contrasts`)."""
        said = strip_contrasts(name).lower()
        found = {m for m in self._mention_set if m in said}
        named: dict[str, str] = {}
        if found:
            for candidate, cores in zip(self.candidates, self._mentions, strict=True):
                hit = next((m for m in cores if m in found), None)
                if hit is not None:
                    named[candidate.name] = hit
        return named

    def diagnostic(self, name: str, technique: str) -> str | None:
        """A word of the name that studies a program rather than changes it (`DIAGNOSTIC_STEMS`:
        "profiling", "detection", "measurement", "calculator") and that `technique`'s own labels and
        description do not use, or None."""
        # (word as shown, its stem): a tool word (`_DIAGNOSTIC_TOOLS`) is found and shown as written
        words = [(w, w) for w in concept_tokens(name) if w in DIAGNOSTIC_STEMS]
        words += [
            (w, t)
            for w in re.findall(r"[a-z]+", expand_abbreviations(name).lower())
            if w in _DIAGNOSTIC_TOOLS
            for t in concept_tokens(w)
        ]
        if not words:
            return None
        owner = next((i for i, c in enumerate(self.candidates) if c.name == technique), None)
        vocabulary = self._vocab[owner] if owner is not None else frozenset()
        return next((shown for shown, stem in words if stem not in vocabulary), None)

    def lone_word(self, name: str, technique: str) -> str | None:
        """(session 27) Why a name of one content word does not name `technique`, or None: its word is
        no word of the technique's own labels (its description or the embedding brought it there), or
        the labels of more than `COMMON_LABEL_WORD_USERS` candidates use it, so the word names a resource
        or a topic of several techniques ("Devices", "Memory", "Warps"), not one of them."""
        words = set(concept_tokens(name))
        owner = next((i for i, c in enumerate(self.candidates) if c.name == technique), None)
        if len(words) != 1 or owner is None:
            return None
        word = next(iter(words))
        if not any(word in tokens for tokens in self._label_tokens[owner]):
            return f"its one word {word!r} is no word of {technique!r}'s names"
        users = sum(any(word in tokens for tokens in labels) for labels in self._label_tokens)
        if users > COMMON_LABEL_WORD_USERS:
            return f"its one word {word!r} is a word of {users} techniques' names"
        return None

    def containment(self, name: str) -> Containment | None:
        """The one candidate whose label the name contains as a phrase, with only generic words around it.

        After normalisation (`concept_tokens`), one of its labels' words must stand contiguous in the
        name, the words before them be instruction words (`LEAD_WORDS`), those after purpose words
        (`PURPOSE_WORDS`): "Employ loop unrolling to reduce overhead" contains Loop unrolling. None when
        the name has a contrary word (`_CONTRARY_WORDS`: "avoid", "instead", "without", ...), when another
        candidate's label is contained too outside the matched phrase (a rival's label inside a longer
        matched one, "tiling" in "shared memory tiling", does not count), or when a leftover word is one
        of the words of another candidate's names and aliases that at most `RARE_WORD_USERS` use.
        """
        raw = set(re.findall(r"[a-z]+", expand_abbreviations(name).lower()))
        if raw & _CONTRARY_WORDS:
            return None
        words = concept_tokens(name)
        spans: list[tuple[int, int, int, str]] = []
        for start, word in enumerate(words):
            for owner, phrase, label in self._phrases.get(word, ()):
                end = start + len(phrase)
                if tuple(words[start:end]) == phrase:
                    spans.append((start, end, owner, label))
        if not spans:
            return None
        start, end, owner, label = max(spans, key=lambda s: (s[1] - s[0], -s[0]))
        if any(o != owner and not (start <= s and e <= end) for s, e, o, _ in spans):
            return None
        before, after = words[:start], words[end:]
        if not set(before) <= LEAD_WORDS or not set(after) <= PURPOSE_WORDS:
            return None
        leftover = tuple(before + after)
        for word in leftover:
            # a word few candidates' names or aliases use is theirs ("latency" of a "latency hiding"
            # alias): the name may mean that technique as much as the contained one
            users = {i for i, labels in enumerate(self._label_tokens) if any(word in t for t in labels)}
            if users - {owner} and len(users) <= RARE_WORD_USERS:
                return None
        return Containment(self.candidates[owner].name, label, leftover)

    def contradicted(self, name: str) -> dict[str, str]:
        """The candidates the name turns against: technique (and its taxonomy concept) -> the contrary
        words and the label they stand before.

        A candidate is contradicted when, right after a contrary word or phrase (`_CONTRARY_MARKER`:
        "avoid", "without", "instead of", "no", "not", "replace", "remove", "eliminate", "get rid of",
        ...; instruction words and "than" may stand between), the name holds one of its labels' words in
        order (`concept_tokens`): "Avoid shared memory tiling", "Disable loop unrolling". Not when that
        phrase is the candidate's problem rather than the candidate itself: from the contrary word on the
        name is one of its labels ("avoid bank conflicts"), or another of its labels puts a reducing word
        beside the phrase ("branch divergence reduction", "fewer atomics": "Avoid branch divergence" is
        Warp divergence reduction, "Avoid warp divergence" holds none of its labels anyway).
        """
        text = expand_abbreviations(name).lower()
        found: dict[str, str] = {}
        for marker in _CONTRARY_MARKER.finditer(text):
            words = concept_tokens(text[marker.end() :])
            while words and words[0] in _CONTRARY_SKIP:
                words = words[1:]
            if not words:
                continue
            whole = concept_tokens(text[marker.start() :])
            for owner, phrase, label in self._phrases.get(words[0], ()):
                if tuple(words[: len(phrase)]) != phrase or self._own_problem(owner, phrase, whole):
                    continue
                candidate = self.candidates[owner]
                said = f"{marker.group(0)!r} before {label!r}"
                for technique in (candidate.name, candidate.concept):
                    if technique:
                        found.setdefault(technique, said)
        return found

    def _own_problem(self, owner: int, phrase: tuple[str, ...], whole: list[str]) -> bool:
        """Whether `phrase` names what candidate `owner` fights, not the candidate (`contradicted`): the
        name from its contrary word on is one of the candidate's labels, or the candidate's name, or one
        of its labels holding the phrase, has a reducing word outside the phrase ("Warp divergence
        reduction" fights "divergent branches"; "shared memory reduction" has its "reduction" inside)."""
        if (
            whole
            and whole[0] in _CONTRARY_STEMS
            and any(o == owner and tuple(whole[: len(p)]) == p for o, p, _ in self._phrases.get(whole[0], ()))
        ):
            return True
        candidate = self.candidates[owner]
        words = set(phrase)
        if _reducing(candidate.name, words):
            return True
        n = len(phrase)
        for label in candidate.labels:
            tokens = concept_tokens(strip_contrasts(label))
            holds = any(tuple(tokens[k : k + n]) == phrase for k in range(len(tokens) - n + 1))
            if holds and _reducing(label, words):
                return True
        return False

    def kind_of(self, name: str) -> str | None:
        """(session 26) The candidate a name is a kind of, or None: a name whose last word is a kind head
        (`KIND_HEADS`: "fusion") with words before it that say which kind ("horizontal_input_fusion",
        "conv_fusion_rewriter"), or only the names of workloads after it ("Fused GEMM",
        `WORKLOADS`), is a kind of the one candidate whose name is that head alone (after
        filler: "Kernel fusion"), unless a word before it names another technique: a word of
        another candidate's name or aliases that at most `RARE_WORD_USERS` candidates use at all and it
        does not ("stencil" of Temporal blocking's "multi-step stencil fusion", "FMA"), a whole label of two or more
        words of another candidate, or only words of another candidate's label
        with the same head ("time fusion" is Temporal blocking's "time-step fusion")."""
        words = content_tokens(name)
        # a workload's name after the head says which kind as one before it does ("Fused GEMM")
        core = [w for w in words if w not in WORKLOADS]
        if (
            not 2 <= len(words) <= KIND_WORDS
            or not core
            or core[-1] not in KIND_HEADS
            or core.count(core[-1]) > 1
        ):
            return None
        owners = [i for i, c in enumerate(self.candidates) if content_tokens(c.name) == core[-1:]]
        if len(owners) != 1:
            return None
        owner = owners[0]
        # the words as the vocabularies hold them ("copy" is "transfer", "fused" is "fuse")
        at = max(i for i, w in enumerate(words) if w not in WORKLOADS)
        concepts = concept_tokens(name)
        head = concepts[at]
        said = set(concepts[:at] + concepts[at + 1 :])
        for i, labels in enumerate(self._label_tokens):
            if i == owner:
                continue
            for tokens in labels:
                if len(tokens - {head}) >= 2 and tokens <= said | {head}:
                    return None  # the name says another candidate's label of two words or more
                if head in tokens and said <= tokens:
                    return None  # only words of another candidate's kind ("time-step fusion")
        for word in said - self._vocab[owner]:
            users = sum(word in vocab for vocab in self._vocab)
            named = any(word in t for labels in self._label_tokens for t in labels)
            if named and users <= RARE_WORD_USERS:
                return None  # a rare word of other techniques' names and aliases ("stencil")
        return self.candidates[owner].name

    def label_hit(self, name: str) -> TechniqueCandidate | None:
        """The graph candidate one of whose labels normalises like `name` (`label_key`, else `bag_key`,
        else a workload name as a label of the kernel: `kernel_keys`)."""
        i = self._keys.get(label_key(name))
        if i is None:
            i = self._bags.get(bag_key(name))
        if i is None:
            workload = workload_key(name)
            i = self._kernel_keys.get(workload) if workload else None
        return self.candidates[i] if i is not None else None

    def copy(self) -> CandidateIndex:
        """A copy to add candidates to (the vectors and matrices are shared until then: `rebuild`
        replaces them, it never writes into them)."""
        other = copy.copy(self)
        other.candidates = list(self.candidates)
        return other

    def add(self, candidate: TechniqueCandidate) -> None:
        """Add one candidate (e.g. a technique created earlier in the same batch)."""
        self.candidates.append(candidate)
        self.rebuild()

    def features(
        self, step: StepText, evidence: CodeEvidence | None, name_vector: Vector, text_vector: Vector
    ) -> np.ndarray[Any, np.dtype[np.float64]]:
        """One feature row per candidate (columns in `FEATURES` order)."""
        n = len(self.candidates)
        out = np.zeros((n, len(FEATURES)), dtype=np.float64)
        if n == 0:
            return out
        assert self._text_rows is not None
        if self._label_stack is not None:
            name_sims = np.maximum.reduceat(self._label_stack @ name_vector, self._label_starts).astype(
                np.float64
            )
        else:
            name_sims = np.array([float(np.max(rows @ name_vector)) for rows in self._label_rows])
        text_sims = self._text_rows @ text_vector
        tokens = set(concept_tokens(step.name))
        # What the step says it did: "switch from __ldg to texture objects" mentions __ldg as what it
        # left behind, which is no evidence for the read-only cache.
        said = strip_contrasts(f"{step.name} {step.detail[:4000]} {step.think[:4000]}").lower()
        blend = 0.5 * name_sims + 0.5 * text_sims
        best = float(np.max(blend))
        code = evidence is not None and evidence.parsed
        support = np.zeros(n)
        absent = np.zeros(n)
        if code:
            assert evidence is not None
            seen = evidence.introduced | evidence.present_after
            for i, candidate in enumerate(self.candidates):
                if candidate.evidence:
                    shown = candidate.evidence & evidence.introduced
                    support[i] = max((self._specificity[s] for s in shown), default=0.0)
                    absent[i] = 0.0 if candidate.evidence & seen else 1.0
        strongest = float(np.max(support))
        step_words = np.zeros(len(self._word_index), dtype=np.float32)
        for word in tokens:
            index = self._word_index.get(word)
            if index is not None:
                step_words[index] = 1.0
        lexical = np.zeros(n)
        if len(self._label_owner) and tokens:
            shared = self._label_matrix @ step_words
            jaccard = shared / np.maximum(self._label_sizes + len(tokens) - shared, 1.0)
            np.maximum.at(lexical, self._label_owner, jaccard)
        unexplained = (
            1.0 - (self._vocab_matrix @ step_words) / len(tokens) if tokens else np.ones(n, dtype=np.float32)
        )
        # Each mention looked up once (candidates share many: "shared memory", "__syncthreads").
        found = {m for m in self._mention_set if m in said}
        for i in range(n):
            mentions = 1.0 if any(m in found for m in self._mentions[i]) else 0.0
            out[i] = (
                name_sims[i],
                text_sims[i],
                lexical[i],
                unexplained[i],
                support[i],
                1.0 if strongest > 0 and support[i] == strongest else 0.0,
                absent[i],
                mentions,
                best - blend[i],
            )
        return out


@dataclass(frozen=True)
class Thresholds:
    """A decision rule's thresholds (see `decide`)."""

    merge_threshold: float
    new_threshold: float
    margin: float
    score: float = 0.0
    """What the calibration scored them (correct - missed - 0.3 x queued), when chosen by it."""


@dataclass(frozen=True)
class ScoringModel:
    """A fitted choice model and its decision thresholds.

    It applies when the relabeler has a taxonomy (the default). Without one the candidates are the
    graph's techniques only, often bare names, and the features mean something else (fewer labels,
    more unexplained words): `without_taxonomy` is the model fitted for that case (`for_knowledge`
    picks it).
    """

    weights: tuple[float, ...]
    bias: float
    merge_threshold: float
    new_threshold: float
    margin: float
    fitted_on: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    without_taxonomy: ScoringModel | None = None
    merge_gate: str = ""
    """"", "known_words" or "explained": what a merge by score needs besides the thresholds (see the
    module docstring)."""

    def for_knowledge(self, *, taxonomy: bool) -> ScoringModel:
        """The model for a relabeler with (or without) a taxonomy."""
        if taxonomy or self.without_taxonomy is None:
            return self
        return self.without_taxonomy

    def probabilities(
        self, features: np.ndarray[Any, np.dtype[np.float64]]
    ) -> np.ndarray[Any, np.dtype[np.float64]]:
        """P(candidate is the step's technique) per row; the rows are all the candidates of one step.

        The probabilities sum to at most 1: the rest is the probability that the step is none of them.
        """
        if len(features) == 0:
            return np.zeros(0, dtype=np.float64)
        z = features @ np.asarray(self.weights) + self.bias
        top = max(float(np.max(z)), 0.0)
        e = np.exp(z - top)
        return np.asarray(e / (np.exp(-top) + float(np.sum(e))), dtype=np.float64)

    def to_json(self) -> dict[str, Any]:
        """The committed file's content."""
        return {
            "format": MODEL_FORMAT,
            "features": list(FEATURES),
            "weights": [round(w, 6) for w in self.weights],
            "bias": round(self.bias, 6),
            "merge_threshold": round(self.merge_threshold, 6),
            "new_threshold": round(self.new_threshold, 6),
            "margin": round(self.margin, 6),
            **({"merge_gate": self.merge_gate} if self.merge_gate else {}),
            **(
                {"without_taxonomy": self.without_taxonomy.to_json()}
                if self.without_taxonomy is not None
                else {}
            ),
            "fitted_on": self.fitted_on,
            "metrics": self.metrics,
        }

    @classmethod
    def from_json(cls, document: dict[str, Any], source: str = "") -> ScoringModel:
        """Read a model file's content; the feature list must be this code's."""
        if document.get("format") != MODEL_FORMAT or tuple(document.get("features", ())) != FEATURES:
            raise ScoringError(f"{source or 'model'}: not a {MODEL_FORMAT} model for features {FEATURES}")
        try:
            model = cls(
                weights=tuple(float(w) for w in document["weights"]),
                bias=float(document["bias"]),
                merge_threshold=float(document["merge_threshold"]),
                new_threshold=float(document["new_threshold"]),
                margin=float(document["margin"]),
                merge_gate=str(document.get("merge_gate", "")),
                fitted_on=str(document.get("fitted_on", "")),
                metrics=dict(document.get("metrics", {})),
                without_taxonomy=(
                    cls.from_json(
                        {"format": MODEL_FORMAT, "features": list(FEATURES), **document["without_taxonomy"]},
                        f"{source or 'model'} (without_taxonomy)",
                    )
                    if document.get("without_taxonomy") is not None
                    else None
                ),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ScoringError(f"{source or 'model'}: invalid model: {e}") from e
        if len(model.weights) != len(FEATURES):
            raise ScoringError(
                f"{source or 'model'}: {len(model.weights)} weights for {len(FEATURES)} features"
            )
        if model.merge_gate not in MERGE_GATES:
            raise ScoringError(f"{source or 'model'}: merge_gate must be one of {MERGE_GATES}")
        if not 0.0 <= model.new_threshold <= model.merge_threshold <= 1.0:
            raise ScoringError(f"{source or 'model'}: need 0 <= new_threshold <= merge_threshold <= 1")
        return model


def load_model(path: Path | None = None) -> ScoringModel:
    """Read the fitted model (default: the committed one)."""
    target = path or DEFAULT_MODEL_PATH
    try:
        document = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ScoringError(f"cannot read the relabel model {target}: {e}") from e
    return ScoringModel.from_json(document, str(target))


def fit_choice(
    steps: Sequence[tuple[np.ndarray[Any, np.dtype[np.float64]], int]],
    *,
    l2: float = 1.0,
    iterations: int = 100,
) -> tuple[tuple[float, ...], float]:
    """Fit the choice model by Newton's method (deterministic; the bias is not penalised).

    `steps`: per step, its candidates' feature rows and the index of the right candidate (-1: none of
    them is right). Maximises the L2-penalised log-likelihood of the right choices.
    """
    d = steps[0][0].shape[1] if steps else len(FEATURES)
    theta = np.zeros(d + 1)
    penalty = np.full(d + 1, l2)
    penalty[-1] = 0.0
    augmented = [(np.hstack([x, np.ones((len(x), 1))]), target) for x, target in steps if len(x)]

    def objective(t: np.ndarray[Any, np.dtype[np.float64]]) -> float:
        total = 0.5 * float(penalty @ (t * t))
        for z, target in augmented:
            scores = z @ t
            top = max(float(np.max(scores)), 0.0)
            log_norm = top + math.log(math.exp(-top) + float(np.sum(np.exp(scores - top))))
            total += log_norm - (float(scores[target]) if target >= 0 else 0.0)
        return total

    current = objective(theta)
    for _ in range(iterations):
        gradient = penalty * theta
        hessian = np.diag(penalty) + 1e-9 * np.eye(d + 1)
        for z, target in augmented:
            scores = z @ theta
            top = max(float(np.max(scores)), 0.0)
            e = np.exp(scores - top)
            p = e / (np.exp(-top) + float(np.sum(e)))
            mean = p @ z
            gradient += mean - (z[target] if target >= 0 else 0.0)
            hessian += (z * p[:, None]).T @ z - np.outer(mean, mean)
        step = np.linalg.solve(hessian, gradient)
        # Damped Newton: halve the step until the penalised objective does not grow.
        scale = 1.0
        while scale > 1e-6:
            candidate = theta - scale * step
            value = objective(candidate)
            if value <= current + 1e-12:
                break
            scale /= 2
        theta, current = candidate, value
        if float(np.max(np.abs(scale * step))) < 1e-8:
            break
    return tuple(float(v) for v in theta[:-1]), float(theta[-1])


@dataclass(frozen=True)
class Ranked:
    """The scorer's view of one step: candidates by probability, best first."""

    names: tuple[str, ...]
    probabilities: tuple[float, ...]
    features: tuple[tuple[float, ...], ...]

    @property
    def top(self) -> tuple[str, float] | None:
        """The best candidate and its probability."""
        return (self.names[0], self.probabilities[0]) if self.names else None

    @property
    def gap(self) -> float:
        """How far the best candidate leads the runner-up (1 with a single candidate)."""
        if len(self.probabilities) < 2:
            return self.probabilities[0] if self.probabilities else 0.0
        return self.probabilities[0] - self.probabilities[1]

    def summary(self, k: int = 3) -> list[dict[str, Any]]:
        """The best `k` candidates with probability and features (what a curator sees)."""
        return [
            {
                "technique": self.names[i],
                "probability": round(self.probabilities[i], 4),
                "features": {f: round(v, 4) for f, v in zip(FEATURES, self.features[i], strict=True)},
            }
            for i in range(min(k, len(self.names)))
        ]


def rank(
    model: ScoringModel, index: CandidateIndex, features: np.ndarray[Any, np.dtype[np.float64]]
) -> Ranked:
    """Order the candidates of `index` by the model's probability."""
    if not index.candidates:
        return Ranked((), (), ())
    p = model.probabilities(features)
    order = sorted(range(len(p)), key=lambda i: (-p[i], index.candidates[i].name))
    return Ranked(
        tuple(index.candidates[i].name for i in order),
        tuple(float(p[i]) for i in order),
        tuple(tuple(float(v) for v in features[i]) for i in order),
    )


def decide(model: ScoringModel, ranked: Ranked, unknown_words: Sequence[str] = ()) -> str:
    """ "merge", "new" or "undecided" by the model's thresholds.

    `unknown_words`: the name's content words no candidate uses (`CandidateIndex.unknown_words`), which
    the `known_words` gate reads.
    """
    top = ranked.top
    if top is None or top[1] < model.new_threshold:
        return "new"
    if (
        top[1] >= model.merge_threshold
        and ranked.gap >= model.margin
        and gate_allows(model.merge_gate, unknown=bool(unknown_words), top_features=ranked.features[0])
    ):
        return "merge"
    return "undecided"


SEPARATION_LEAD = 0.02
"""How far (cosine) the best candidate must lead every other candidate on the name alone, or on
"name: detail", for that text to separate it (see `separation`)."""
UNEXPLAINED_LEAD = 0.22
"""How much more name lead each unit of the name's unexplained share costs: a name a third of whose
words the best candidate lacks needs a lead of 0.09 on the name alone ("Checkpointing device state to
host memory" is not zero-copy host memory for being a hair nearer to it than to pinned memory)."""
OWN_WORDS = 2
"""A name with this many words that no candidate uses, and more than half of its words missing from the
best candidate's (half, when the name is the only evidence), is not separated by anything (see
`separation`)."""
WORDS_EXPLAINED = 1.0 / 3.0
"""At most this share of the name's content words may be missing from the best candidate's labels and
description for its words to separate it (with its description, see `separation`)."""
WORDS_COVERED = 0.6
"""The share of the name's telling words (`CandidateIndex.word_coverage`) the best candidate must use for
its words alone to separate it (see `separation`)."""
WORDS_LEAD = 0.25
"""How far that share must lead every other candidate's."""
NAME_CONFLICT = 0.1
ONE_WORD_LEAD = NAME_CONFLICT
"""(session 25) A name that shares one word with the best candidate separates it when the name is this
much nearer (cosine) to it than to every other candidate, the shared word is a word of the candidate's
own name, at most half of the name is unexplained, and no other word of the name is a rare word of
another candidate (`WordCoverage.foreign`): the margin that makes a name point elsewhere, the other
way round (see `separation`)."""
"""A name this much nearer (cosine) to another candidate than to the best one points elsewhere: the step
is queued whatever its detail or code say."""


def separation(
    ranked: Ranked, *, name_words: int, detail: bool, coverage: WordCoverage | None = None
) -> str | None:
    """Why the best candidate is not separated from the others, or None when it is (precision first).

    A merge by score needs evidence that tells the best candidate from every other one, not a
    probability resting on one shared word or head noun ("Register spilling reduction" is not a warp
    shuffle reduction because both say "reduction"). It is separated when at least one of these holds:

    - *name*: its best label is the name's nearest (cosine) by `SEPARATION_LEAD` over every other
      candidate, plus `UNEXPLAINED_LEAD` times the share of the name's words it leaves unexplained, and
      the name shares more than one content word with it (or has only one);
    - *each rival on its own*: the name shares two of its words, at most `WORDS_EXPLAINED` unexplained,
      none unknown to every candidate, and every other candidate trails by `SEPARATION_LEAD` on the
      name, or trails on the name and by `SEPARATION_LEAD` on "name: detail" explaining no more words,
      or leads by less than `SEPARATION_LEAD` on the name (or trails by less) and by `SEPARATION_LEAD`
      on "name: detail" explaining fewer of the name's words;
    - *detail*: the step has a detail and "name: detail" is nearest to its "name: description" by
      `SEPARATION_LEAD`;
    - *code*: the code change supports it more than any other candidate (`evidence_support`);
    - *mentions*: the name, detail or think mention an identifier of it and of no other candidate
      (negated mentions, "switch from __ldg to ...", do not count: `strip_contrasts`).
    - *telling words* (with `coverage`, `CandidateIndex.word_coverage`): its labels and description use
      at least two of the name's content words, one of them a rare word (`RARE_WORD_USERS`), the name
      has no word that no candidate uses ("Zorbification of the inner loop" is not separated by words),
      `WORDS_COVERED` of the name's words weighted by how telling each is, and `WORDS_LEAD` more than
      any other candidate ("Minimizing copies between
      CPU and GPU": copy and CPU are the host-device transfer technique's words, "minimizing" few
      others'; no other technique uses more than half of them).

    - *one shared word, a clear name lead* (session 25, with `coverage`): the name shares one word with
      it, a word of its own name, at most half of the name's words are unexplained, the name's best
      label leads every other candidate's by `ONE_WORD_LEAD`, and no other word of the name is a rare
      word of another candidate (`WordCoverage.foreign`).

    And whatever the detail or code say, a name `NAME_CONFLICT` nearer to another candidate points
    elsewhere: name and detail disagree, and a curator decides; and a name more than half of whose
    content words the best candidate lacks (half, when the name is all the step says: no detail, no code
    support, no mention), `OWN_WORDS` of them used by no candidate, may name what the graph lacks ("Bank
    conflict detection with Nsight Compute", "Sliced K - reduction across warps"): a curator decides too;
    so does a name that is all the step says, half of whose words the best candidate lacks, when its head
    word (`head_word`) is one no candidate uses ("Use efficient data-parallel backend").
    """
    if len(ranked.names) < 2:
        return None
    name_sim, text_sim = FEATURES.index("name_sim"), FEATURES.index("text_sim")
    support, mentions = FEATURES.index("evidence_support"), FEATURES.index("mentions")
    unexplained = FEATURES.index("unexplained")
    top, others = ranked.features[0], ranked.features[1:]
    nearest = max(range(len(others)), key=lambda i: others[i][name_sim])
    name_lead = top[name_sim] - others[nearest][name_sim]
    if name_lead <= -NAME_CONFLICT:
        return (
            f"name_points_elsewhere: the name is nearer to {ranked.names[1 + nearest]!r} "
            f"({others[nearest][name_sim]:.2f}) than to {ranked.names[0]!r} ({top[name_sim]:.2f})"
        )
    name_only = not detail and top[support] <= 0.0 and top[mentions] <= 0.0
    if coverage is not None and (
        (
            coverage.unknown >= OWN_WORDS
            and (top[unexplained] > 0.5 or (top[unexplained] >= 0.5 and name_only))
        )
        or (coverage.head_unknown and top[unexplained] >= 0.5 and name_only)
    ):
        # most of the name is not the best candidate's, and some of it no technique's at all: it may name
        # what the graph lacks ("Bank conflict detection with Nsight Compute", "Emulating double
        # precision with pairs of floats"), whatever its shared words, mentions or code say. Half of it
        # too when the name is all the evidence (no detail, code or mention): "Sliced K - reduction
        # across warps" shares only its head ("reduction", "warp") with the warp shuffle reduction. And
        # (session 21) half of it when the name is all the evidence and its head word is no technique's:
        # the shared half only modifies what the graph lacks ("Use efficient data-parallel backend" is a
        # distributed-training backend, "Mixed precision iterative refinement" a solver).
        return (
            f"name_unexplained: {top[unexplained]:.0%} of the name's words are not {ranked.names[0]!r}'s, "
            f"{coverage.unknown} of them no technique's"
        )
    if coverage is not None and coverage.common_phrase and top[support] <= 0.0 and top[mentions] <= 0.0:
        # (session 22) a word no technique uses, on a phrase that several techniques' labels hold
        # ("Nontemporal memory access": "memory access" is in coalescing's, vectorized access's and bank
        # conflict avoidance's labels, "nontemporal" in none): the unknown word is what says which
        # technique, and the graph lacks it, whatever the detail says; no code or mention says otherwise.
        return (
            f"name_unexplained: {coverage.unknown} of the name's words no technique's, the rest a phrase "
            f"of several techniques' labels"
        )
    if top[support] > max(o[support] for o in others) or top[mentions] > max(o[mentions] for o in others):
        return None
    shared = round(name_words * (1.0 - top[unexplained]))
    if name_lead >= SEPARATION_LEAD + UNEXPLAINED_LEAD * top[unexplained] and not (
        shared <= 1 and name_words >= 2
    ):
        return None
    # (session 25) one shared word, but the embedding puts the name far nearer to the best candidate than
    # to any other, the shared word is of the candidate's own name (not only of an alias: "basic" of
    # "basic CUDA kernel" is no Parallelization), and the name's other words say nothing of another
    # technique: "CLC Persistent Kernel", "elementwise_kernel_fusion". "Multi-dimensional
    # parallelization" stays queued: "multidimensional" is Multidimensional thread mapping's word.
    if (
        coverage is not None
        and shared == 1
        and name_words >= 2
        and top[unexplained] <= 0.5
        and name_lead >= ONE_WORD_LEAD
        and coverage.foreign.get(ranked.names[0], 0) == 0
        and coverage.own_name.get(ranked.names[0], 0) >= 1
    ):
        return None
    text_lead = top[text_sim] - max(o[text_sim] for o in others)
    if detail and text_lead >= SEPARATION_LEAD:
        return None
    # words and description agree: the best candidate's own words explain most of the name and more of
    # it than its rivals' (the runner-up and the name's nearest other), and the name (with its detail)
    # is nearest to its description. Two signals that each fail alone ("Algorithm Cascading" shares one
    # word of two; a description may be near by topic only) separate together.
    rivals = (others[0][unexplained], others[nearest][unexplained])
    if (
        top[unexplained] <= WORDS_EXPLAINED
        and top[unexplained] < min(rivals)
        and text_lead >= SEPARATION_LEAD
    ):
        return None
    # each rival beaten on its own: clearly by the name, or by a hair on the name and clearly on "name:
    # detail" with no fewer of the name's words explained ("Several outputs per thread" with its detail:
    # a hair nearer to coarsening than to Parallelization's "one thread per output", its detail nearer
    # coarsening's description, all its words coarsening's and half of them Parallelization's; far
    # from register tiling by name, though register tiling's description is as near). Or, session 20,
    # a hair behind on the name (less than SEPARATION_LEAD) with the detail clearly nearer and more of
    # the name's words explained ("Process four outputs per thread": 0.01 nearer to Parallelization by
    # name, a third of its words unexplained by coarsening and two thirds by Parallelization).
    if (
        shared >= 2
        and top[unexplained] <= WORDS_EXPLAINED
        and (coverage is None or not coverage.unknown)
        and all(
            top[name_sim] - o[name_sim] >= SEPARATION_LEAD
            or (
                detail
                and top[text_sim] - o[text_sim] >= SEPARATION_LEAD
                and (
                    (top[name_sim] > o[name_sim] and top[unexplained] <= o[unexplained])
                    # a hair behind on the name, but more of its words explained (session 20)
                    or (top[name_sim] > o[name_sim] - SEPARATION_LEAD and top[unexplained] < o[unexplained])
                )
            )
            for o in others
        )
    ):
        return None
    if (
        coverage is not None
        and shared >= 2
        and not coverage.unknown
        and coverage.rare.get(ranked.names[0], 0) > 0
    ):
        top_words = coverage.shares.get(ranked.names[0], 0.0)
        rival_words = max(coverage.shares.get(n, 0.0) for n in ranked.names[1:])
        if top_words >= WORDS_COVERED and top_words - rival_words >= WORDS_LEAD:
            return None
    return (
        f"not_separated: nothing in the name ({name_lead:+.2f} over the nearest other technique"
        f"{', one shared word' if shared <= 1 and name_words >= 2 else ''}), the detail or the code tells "
        f"{ranked.names[0]!r} from {ranked.names[1 + nearest] if name_lead < 0 else ranked.names[1]!r}"
    )


def containment_conflict(ranked: Ranked, contained: Containment, *, detail: bool) -> str | None:
    """Why a name containing `contained`'s label still does not separate it, or None when it does.

    Containment (`CandidateIndex.containment`) is evidence from the name alone; other evidence that
    points elsewhere still queues the step: the scorer ranks another candidate first, another candidate
    has more code support or mentions, or "name: detail" is `SEPARATION_LEAD` nearer to another
    candidate's description (name and detail point to different techniques).
    """
    if not ranked.names or ranked.names[0] != contained.technique:
        best = ranked.names[0] if ranked.names else None
        return (
            f"containment_disagrees: the name contains {contained.label!r}, the scorer ranks {best!r} first"
        )
    if len(ranked.names) < 2:
        return None
    text_sim = FEATURES.index("text_sim")
    support, mentions = FEATURES.index("evidence_support"), FEATURES.index("mentions")
    top, others = ranked.features[0], ranked.features[1:]
    if top[support] < max(o[support] for o in others) or top[mentions] < max(o[mentions] for o in others):
        return f"containment_disagrees: the code or its mentions favour another technique than {contained.technique!r}"
    if detail and max(o[text_sim] for o in others) - top[text_sim] >= SEPARATION_LEAD:
        return (
            f"containment_disagrees: the detail is nearer to another technique than {contained.technique!r}"
        )
    return None


def kind_conflict(ranked: Ranked, technique: str, *, detail: bool) -> str | None:
    """(session 26) Why a name that is a kind of `technique` (`CandidateIndex.kind_of`) is still not
    merged into it, or None: the name is `NAME_CONFLICT` nearer to another candidate, another
    candidate has more code support or mentions, or "name: detail" is `SEPARATION_LEAD` nearer to
    another candidate's description (name and detail point to different techniques)."""
    if technique not in ranked.names:
        return f"kind_disagrees: {technique!r} is not a candidate"
    at = ranked.names.index(technique)
    own = ranked.features[at]
    others = [f for i, f in enumerate(ranked.features) if i != at]
    if not others:
        return None
    name_sim, text_sim = FEATURES.index("name_sim"), FEATURES.index("text_sim")
    support, mentions = FEATURES.index("evidence_support"), FEATURES.index("mentions")
    if max(o[name_sim] for o in others) - own[name_sim] >= NAME_CONFLICT:
        return f"kind_disagrees: the name is nearer to another technique than {technique!r}"
    if own[support] < max(o[support] for o in others) or own[mentions] < max(o[mentions] for o in others):
        return f"kind_disagrees: the code or its mentions favour another technique than {technique!r}"
    if detail and max(o[text_sim] for o in others) - own[text_sim] >= SEPARATION_LEAD:
        return f"kind_disagrees: the detail is nearer to another technique than {technique!r}"
    return None


EXPLAINED_SHARE = 0.2
"""The share of the name's content words the best candidate may leave unexplained under the `explained`
gate (session 31b): one word in five or more. Chosen leave-one-set-out over the own set and every
development set (bare graph: each fold picked 0.2; one word in four already merges "shuffle-based warp
prefix sum" into the warp reduction); see `bench/results/relabel/2026-11-30_s31b_gate_audit.md`."""


def gate_allows(gate: str, *, unknown: bool, top_features: Sequence[float]) -> bool:
    """Whether `gate` lets a step merge by score into its best candidate (features in `FEATURES` order)."""
    if gate == "known_words":
        return not unknown
    if gate == "explained":
        return float(top_features[FEATURES.index("unexplained")]) <= EXPLAINED_SHARE + 1e-6
    return True
