"""Relabeling: map a method name written in a trajectory onto the graph's techniques.

An exact name or alias match (ignoring case) is used as is. Otherwise `RelabelPolicy` decides: a label
of a graph technique or of the taxonomy that normalises like the name merges it; else the fitted
choice model (`search.relabel.scoring`) scores every candidate on the step's name, detail, think and
code change, and

- the best candidate's probability >= `merge_threshold`: the name becomes an alias of it (or the
  canonical taxonomy technique is created);
- below `new_threshold`: a new technique;
- in between: a configured `Judge` (an LLM) picks among the best candidates, and its answer is
  checked like in the paper (a "same as" that names a method not offered is refused); with no judge,
  or a refused answer, the name is kept as a new technique and flagged for curators.

Precision first: a merge by score also needs evidence that separates the best candidate from the others
(`search.relabel.scoring.separation`), a "new" needs a name made of known words, and a name that cannot
name a technique (`name_problem`) is queued with its reason before anything is scored. Likely duplicates
(`pair_scores`) follow the same rule.

Every non-exact decision is recorded as a `RelabelDecision` (and can be undone through the store).
Within one trajectory the session also sees the techniques and aliases it is about to create.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import unicodedata
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from graphdb.models import AliasAddition, RelabelDecision, RelabelOutcome, Technique, utc_now
from search.backends.base import ChatMessage, ChatModel, ModelError
from search.backends.config import ModelRoles, build_model, require_structured_output
from search.embeddings import Embedder, EmbeddingError, default_model_path, technique_text
from search.errors import SearchError
from search.protocols import INITIAL_TECHNIQUE
from search.relabel.evidence import CodeEvidence, code_evidence, name_code_mismatch
from search.relabel.examples import EXAMPLE_MERGE, EXAMPLE_NEW, ExampleBank, LabelledName, read_examples
from search.relabel.scoring import (
    FEATURES,
    CandidateIndex,
    Ranked,
    ScoringModel,
    StepText,
    TechniqueCandidate,
    TextVectors,
    containment_conflict,
    decide,
    generic_name,
    kind_conflict,
    load_model,
    rank,
    separation,
    shared_text_vectors,
)
from search.relabel.taxonomy import (
    COMPILER_NAMES,
    Taxonomy,
    concept_tokens,
    default_taxonomy,
    label_key,
    taxonomy_setting,
    workload_key,
)

logger = logging.getLogger(__name__)


class RelabelError(SearchError):
    """A method name cannot be relabeled (empty, or the thresholds make no sense)."""


class JudgeError(SearchError):
    """The judge could not answer; the relabeler then flags the name for curators."""


class TechniqueReader(Protocol):
    """What relabeling reads of a graph (a `GraphStore` is one; so is an in-memory catalogue)."""

    def find_technique_by_label(self, label: str) -> Technique | None: ...

    def list_techniques(self, *, limit: int = 100, offset: int = 0) -> list[Technique]: ...


class Judge(Protocol):
    """Decides whether `candidate` names one of `options`; answers {"existed": bool, "method": str}."""

    def __call__(self, candidate: str, description: str, options: list[str]) -> dict[str, Any]: ...


JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"existed": {"type": "boolean"}, "method": {"type": "string"}},
    "required": ["existed", "method"],
    "additionalProperties": False,
}


def judge_prompt(candidate: str, description: str, options: list[str]) -> str:
    """The question the judge is asked: is `candidate` (described by `description`) one of `options`?"""
    listing = "\n".join(f"- {o}" for o in options)
    return (
        "You maintain a catalogue of CUDA optimization methods.\n"
        f"Known methods:\n{listing}\n\n"
        f"New method name: {candidate}\n"
        + (f"What the step did: {description}\n" if description else "")
        + "Is the new method the same technique as one of the known methods (not merely related)? "
        'Answer JSON {"existed": true, "method": "<the known method, copied exactly>"} or '
        '{"existed": false, "method": "<the new name>"}.'
    )


class ChatModelJudge:
    """A `Judge` asking a chat model; call it from a thread without a running event loop."""

    def __init__(self, model: ChatModel, *, max_tokens: int = 200) -> None:
        """Ask `model` (any backend) with a JSON-schema-constrained answer."""
        self.model = model
        self.max_tokens = max_tokens
        # One event loop for every question: an HTTP backend pools connections bound to the loop that
        # opened them, so a fresh loop per call (asyncio.run) would reuse a connection of a closed one.
        self._loop: asyncio.AbstractEventLoop | None = None

    def __call__(self, candidate: str, description: str, options: list[str]) -> dict[str, Any]:
        """Ask whether `candidate` is one of `options`; return the parsed JSON answer."""
        prompt = judge_prompt(candidate, description, options)
        try:
            if self._loop is None or self._loop.is_closed():
                self._loop = asyncio.new_event_loop()
            completion = self._loop.run_until_complete(
                self.model.complete(
                    [ChatMessage(role="user", content=prompt)],
                    max_tokens=self.max_tokens,
                    temperature=0.0,
                    seed=0,
                    json_schema=JUDGE_SCHEMA,
                )
            )
        except ModelError as e:
            raise JudgeError(f"the judge model failed: {e}") from e
        try:
            answer = json.loads(completion.text)
        except json.JSONDecodeError as e:
            raise JudgeError(f"the judge did not answer JSON: {completion.text[:200]!r}") from e
        if not isinstance(answer, dict):
            raise JudgeError(f"the judge answered {type(answer).__name__}, not an object")
        return answer


def judge_options(ranked: Ranked, new_threshold: float, candidates: int) -> list[str]:
    """The methods offered to the judge: the best `candidates` whose probability is at least
    `new_threshold`, else (none is) the best `candidates` whatever their probability."""
    likely = [n for n, p in zip(ranked.names, ranked.probabilities, strict=True) if p >= new_threshold]
    return likely[:candidates] or list(ranked.names[:candidates])


MAX_DETAIL_FLAG_CHARS = 100_000
"""A step detail longer than this is flagged for a curator (a teacher's detail is a paragraph)."""
MAX_NAME_CHARS = 200
"""A method name longer than this is refused (a technique's name is a few words)."""


def normalize_label(label: str) -> str:
    """A method name with surrounding and repeated whitespace removed."""
    return re.sub(r"\s+", " ", label).strip()


QUEUED_NAME_CHARS = 120
"""A name too long to be a technique's name waits in the queue under its first this-many characters."""
_SCRIPT_EXEMPT = frozenset({"COMMON", "INHERITED"})


def _script(char: str) -> str:
    """The script a letter belongs to, from its Unicode name ("LATIN", "CYRILLIC", "CJK", ...)."""
    try:
        return unicodedata.name(char).split(" ")[0]
    except ValueError:
        return "UNKNOWN"


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a technique, or None.

    One character, only punctuation, only filler words ("the", "use", "optimization"...), longer than
    `MAX_NAME_CHARS`, or letters from more than one script ("Сoalescing" with a Cyrillic С): such a
    name is queued with this reason, never made a technique of its own and never merged.
    """
    stripped = name.strip()
    alnum = [c for c in stripped if c.isalnum()]
    if len(stripped) > MAX_NAME_CHARS:
        return f"the name has {len(stripped)} characters (at most {MAX_NAME_CHARS})"
    if not alnum:
        return "the name has no letter or digit"
    if len(alnum) < 2:
        return "the name is one character"
    scripts = {_script(c) for c in stripped if c.isalpha()} - _SCRIPT_EXEMPT
    if len(scripts) > 1:
        return f"the name mixes scripts ({', '.join(sorted(scripts))})"
    if not re.search(r"[A-Za-z0-9]", stripped):
        return "the name has no word in Latin letters or digits (the relabeler reads English names)"
    if not label_key(stripped):
        return "the name has only filler words"
    if workload_key(stripped) == "":
        # "GEMM" or "softmax kernel" alone (`WORKLOADS`) says what the kernel computes, not how
        return "the name has only filler words and the name of a workload"
    return None


_CPP_KEYWORD_TEXT = """
    alignas alignof and asm auto bitand bitor bool break case catch char class compl concept const
    consteval constexpr constinit continue decltype default delete do double else enum explicit
    export extern false float for friend goto if inline int long mutable namespace new noexcept not
    nullptr operator or private protected public register requires return short signed sizeof static
    struct switch template this throw true try typedef typeid typename union unsigned using virtual
    void volatile while xor
"""
CPP_KEYWORDS: frozenset[str] = frozenset(_CPP_KEYWORD_TEXT.split())
"""The keywords of C++ (CUDA C++'s own words; those with an underscore or a digit are identifiers
anyway): names about code write them as words ("struct of arrays", "constexpr sizes"), and an English
word list lacks some ("struct", "enum", "constexpr", "nullptr")."""


@lru_cache(maxsize=1)
def common_words() -> frozenset[str]:
    """English (and common technical) words: an English word list (`pyspellchecker`'s English word
    frequency list, MIT: about 128,000 words in lower-case letters, inflected forms and names
    included), the keywords of C++ (`CPP_KEYWORDS`) and the whole-word entries of the embedding model's
    word-piece vocabulary (which holds a few technical words the list lacks).

    Only the words are read, never their counts: a word a curator would look up is a word. Without the
    package (an installation that skipped the project's dependencies) the other two are the dictionary,
    as before session 28, with a warning: more real words then queue as not understood, none merges.
    """
    words = set(CPP_KEYWORDS)
    try:
        from spellchecker import SpellChecker  # here: its list loads once, when a "new" is first checked
    except ImportError:
        logger.warning(
            "pyspellchecker is not installed: made-up words are checked against the embedding model's "
            "vocabulary only (install the project's dependencies)"
        )
    else:
        english = SpellChecker(language="en", distance=1).word_frequency.keys()
        words.update(w for w in english if w.isascii() and w.isalpha() and w.islower())
    try:
        path = default_model_path() / "vocab.txt"
        words.update(w for w in path.read_text(encoding="utf-8").splitlines() if w.isalpha() and w.islower())
    except (EmbeddingError, OSError):
        pass
    return frozenset(words)


_SUFFIXES: tuple[str, ...] = (
    "s",
    "es",
    "ed",
    "ing",
    "er",
    "ers",
    "or",
    "ors",
    "ly",
    "ic",
    "al",
    "ive",
    "ize",
    "ise",
    "ation",
    "ations",
    "ization",
    "ment",
    "ity",
    "ities",
    "ility",
    "ibility",
    "ability",
    "ness",
    "wise",
)
_PREFIXES: tuple[str, ...] = (
    "re",
    "un",
    "de",
    "en",
    "pre",
    "multi",
    "sub",
    "co",
    "inter",
    "intra",
    "non",
    "over",
    "under",
    "semi",
    "micro",
)
_ROOT_ENDINGS: tuple[str, ...] = ("", "e", "ed", "ing", "s")
"""A root stripped of a suffix is a word when one of its regular forms is ("dedicat" -> "dedicated")."""


def _is_word(word: str, known: frozenset[str]) -> bool:
    """Whether `word` is a dictionary word or a regular inflection of one ("accumulators", "padding")."""
    if word in known:
        return True
    for prefix in _PREFIXES:
        # "rewrite", "precompute", "multistage": a known word behind a common prefix
        if word.startswith(prefix) and len(word) - len(prefix) >= 4 and _is_word(word[len(prefix) :], known):
            return True
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            root = word[: -len(suffix)]
            # "padding" -> "pad", "tiling" -> "tile", "swizzled" -> "swizzle", "sparsity" -> "sparse"
            if any(f"{root}{ending}" in known for ending in _ROOT_ENDINGS) or (
                len(root) > 3 and root[-1] == root[-2] and root[:-1] in known
            ):
                return True
    # a compound of two words: "elementwise", "workgroup", "threadblock"
    return any(word[:i] in known and word[i:] in known for i in range(3, len(word) - 2))


def strange_words(name: str, vocabulary: frozenset[str] | set[str]) -> list[str]:
    """The made-up words of a name that is otherwise familiar: words that neither a dictionary nor any
    technique (`vocabulary`: stemmed content words of the graph's and the taxonomy's labels and
    descriptions) knows, when every other content word of the name is a technique's word.

    "Zorbification of the inner loop" -> ["zorbification"]: a familiar phrase around a word nobody
    knows, which no curator would accept as a technique unseen. A name with other unfamiliar (but real)
    words, "Kahan compensated summation", names a topic the graph lacks and returns nothing.
    Identifiers (atomicAdd, __ldg, SGEMM, float4) are code, never strange.
    """
    known = common_words()
    strange: list[str] = []
    familiar = True
    for raw in re.findall(r"[A-Za-z][A-Za-z0-9_]*", name):
        if "_" in raw or any(c.isdigit() for c in raw) or any(c.isupper() for c in raw[1:]):
            continue  # an identifier (atomicAdd, __ldg, float4, SGEMM): code, not prose
        word = raw.lower()
        if word in COMPILER_NAMES:
            familiar = False  # a compiler's name: a real word no technique uses
            continue
        stems = set(concept_tokens(word))
        if not stems or stems & vocabulary:
            continue
        if len(word) >= 3 and not _is_word(word, known):
            strange.append(word)
        else:
            familiar = False
    return strange if familiar else []


_SEPARATION_FLAGS = ("not_separated:", "name_points_elsewhere:", "name_unexplained:")
"""The flags of a model merge that `separation` stopped (a kind of the technique lifts them)."""


def queued_name(name: str) -> str:
    """The technique name a queued step waits under (a too-long name is cut)."""
    return name if len(name) <= MAX_NAME_CHARS else name[:QUEUED_NAME_CHARS].rstrip() + "..."


@dataclass(frozen=True)
class StepInput:
    """Everything a step says about the technique it applied."""

    name: str
    detail: str = ""
    think: str = ""
    code_before: str | None = None
    code_after: str | None = None

    @property
    def text(self) -> StepText:
        """Name, detail and think (what the scorer embeds and scans)."""
        return StepText(self.name, self.detail, self.think)


@dataclass(frozen=True)
class RelabelChoice:
    """What the policy decided for one step, before anything is written."""

    outcome: str
    """ "merge" (into `technique`), "new" (create `technique`) or "undecided" (the judge, or the queue)."""
    technique: str
    decided_by: str
    canonical: Technique | None = None
    """For a new technique taken from the taxonomy: the node to create."""
    ranked: Ranked | None = None
    evidence: CodeEvidence | None = None
    flags: tuple[str, ...] = ()
    example: dict[str, Any] | None = None
    """(session 32) The labelled example that decided the step (`search.relabel.examples`): its name,
    technique (None: no taxonomy technique) and cosine."""

    @property
    def names_technique(self) -> bool:
        """Whether the step lands on a known technique: merged into one, or one created from the taxonomy."""
        return self.outcome == "merge" or (self.outcome == "new" and self.canonical is not None)

    def evidence_json(self) -> dict[str, Any]:
        """The evidence a curator sees next to the decision."""
        out: dict[str, Any] = {"decided_by": self.decided_by}
        if self.ranked is not None:
            out["candidates"] = self.ranked.summary()
        if self.evidence is not None:
            out["code"] = self.evidence.to_json()
        if self.example is not None:
            out["example"] = self.example
        return out


def technique_candidates(techniques: list[Technique], taxonomy: Taxonomy | None) -> list[TechniqueCandidate]:
    """The graph's techniques as scoring candidates, plus the taxonomy techniques the graph lacks.

    A graph technique whose name or alias is a label of a taxonomy technique is linked to it and
    inherits its labels, description (when it has none) and evidence signals.
    """
    out: list[TechniqueCandidate] = []
    linked: set[str] = set()
    for technique in techniques:
        if technique.name == INITIAL_TECHNIQUE:
            continue
        concept = None
        if taxonomy is not None:
            for label in (technique.name, *technique.aliases):
                concept = taxonomy.lookup(label)
                if concept is not None:
                    break
        labels = [technique.name, *technique.aliases]
        if concept is not None:
            linked.add(concept.name)
            labels += [label for label in concept.labels if label not in labels]
        out.append(
            TechniqueCandidate(
                name=technique.name,
                description=technique.description or (concept.description if concept else ""),
                labels=tuple(labels),
                evidence=frozenset(concept.evidence) if concept else frozenset(),
                mentions=tuple(concept.mentions) if concept else (),
                in_graph=True,
                concept=concept.name if concept else None,
            )
        )
    if taxonomy is not None:
        for concept in taxonomy.techniques:
            if concept.name not in linked:
                out.append(
                    TechniqueCandidate(
                        name=concept.name,
                        description=concept.description,
                        labels=tuple(concept.labels),
                        evidence=frozenset(concept.evidence),
                        mentions=tuple(concept.mentions),
                        in_graph=False,
                        concept=concept.name,
                    )
                )
    return out


@lru_cache(maxsize=1)
def _packaged_examples() -> tuple[str, list[LabelledName]]:
    """The packaged examples (read once per process)."""
    return read_examples()


class RelabelPolicy:
    """The decision rule, independent of any store: alias and taxonomy hits first, then the scorer.

    1. a label of a graph technique that normalises like the name (`label_key`): merge ("alias");
    2. a taxonomy technique with such a label: merge into the graph technique linked to it, or create
       it under its canonical name ("taxonomy");
    3. otherwise the fitted scorer ranks every candidate and `decide` merges, creates or leaves the
       step undecided ("model"). A best candidate that is a taxonomy technique the graph lacks means
       creating that canonical technique.

    4. precision first: a model merge the evidence does not separate (`separation`), or a model "new"
       whose name holds a made-up word (`strange_words`), is undecided with the reason as a flag; a
       name that cannot name a technique (`name_problem`) is undecided before any of this.

    A step is flagged when its name mentions a CUDA identifier its code never uses, when its code
    does not parse, or when it merges into a technique whose evidence signals its code lacks.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        taxonomy: Taxonomy | None,
        model: ScoringModel,
        vectors: TextVectors | None = None,
        examples: Sequence[LabelledName] | None = None,
    ) -> None:
        """Score with `model`; `taxonomy` (or None) is the background knowledge; `vectors` a shared cache;
        `examples` the labelled names a name is compared with (default: the packaged ones, used when
        they are labelled against `taxonomy`'s version; `search.relabel.examples`)."""
        self.embedder = embedder
        self.taxonomy = taxonomy
        self.model = model.for_knowledge(taxonomy=taxonomy is not None)
        self.vectors = vectors or shared_text_vectors(embedder)
        self._examples = examples
        self._bank: ExampleBank | None = None

    def example_bank(self) -> ExampleBank | None:
        """The examples with their vectors (built on first use); None without a taxonomy. The packaged
        examples are left out (an empty bank) when labelled against another taxonomy version or naming
        techniques the taxonomy lacks."""
        if self.taxonomy is None:
            return None
        if self._bank is None:
            examples = self._examples
            if examples is None:
                version, examples = _packaged_examples()
                known = {t.name for t in self.taxonomy.techniques}
                if version != self.taxonomy.version or any(
                    e.technique is not None and e.technique not in known for e in examples
                ):
                    # labelled against another taxonomy (a version, or a test's own taxonomy): not used
                    examples = []
            self._bank = ExampleBank(examples, self.vectors, self.taxonomy)
        return self._bank

    def index(self, techniques: list[Technique]) -> CandidateIndex:
        """Candidates for the graph's `techniques` (with the taxonomy techniques it lacks)."""
        return CandidateIndex(technique_candidates(techniques, self.taxonomy), self.vectors)

    def prepare(self, steps: list[StepInput], index: CandidateIndex | None = None) -> None:
        """Embed the texts of many steps in one batch (the per-step decisions then hit the cache).

        With `index`, a step whose name a graph label or the taxonomy decides gets only its
        "name: detail" embedded (what its decision record keeps), not its name.
        """
        names = [
            s.text.embedded_name()
            for s in steps
            if index is None
            or (
                index.label_hit(s.name) is None
                and (self.taxonomy is None or self.taxonomy.lookup(s.name) is None)
            )
        ]
        self.vectors.ensure(names + [s.text.embedded_text() for s in steps])

    def choose(self, step: StepInput, index: CandidateIndex) -> RelabelChoice:
        """Decide one step against `index`."""
        name = step.name
        evidence = None
        flags: list[str] = []
        if len(step.detail) > MAX_DETAIL_FLAG_CHARS:
            flags.append(f"detail_oversized: {len(step.detail)} characters (only the start was read)")
        if step.code_after is not None:
            evidence = code_evidence(step.code_before or "", step.code_after)
            if not evidence.parsed:
                flags.append(f"code_unparsed: {evidence.reason}")
            missing = name_code_mismatch(name, evidence)
            if missing:
                flags.append(
                    f"name_code_mismatch: the name mentions {', '.join(missing)}, which the code never uses"
                )
        problem = name_problem(name)
        if problem is not None:
            # Precision first: a name that cannot name a technique is neither merged nor made one.
            flags.append(f"name_unusable: {problem}")
            return RelabelChoice(
                "undecided", queued_name(name), "model", evidence=evidence, flags=tuple(flags)
            )
        choice: RelabelChoice | None = None
        example_note: dict[str, Any] | None = None
        if label_key(name):
            hit = index.label_hit(name)
            if hit is not None:
                choice = RelabelChoice("merge", hit.name, "alias", evidence=evidence)
        if choice is None and self.taxonomy is not None:
            concept = self.taxonomy.lookup(name)
            if concept is not None:
                choice = self._concept_choice(concept.name, index, "taxonomy", evidence, None)
        if choice is None:
            features = index.features(
                step.text,
                evidence,
                self.vectors.get(step.text.embedded_name()),
                self.vectors.get(step.text.embedded_text()),
            )
            ranked = rank(self.model, index, features)
            verdict = decide(self.model, ranked, index.unknown_words(name))
            if verdict == "merge":
                # Precision first: the probability must rest on evidence that tells the best candidate
                # from the others (name, detail, code), not on one shared word.
                reason = separation(
                    ranked,
                    name_words=len(set(concept_tokens(name))),
                    detail=bool(step.detail.strip()),
                    coverage=index.word_coverage(name),
                )
                if reason is not None:
                    # A name that contains the best candidate's label, with only generic words around
                    # it ("Employ loop unrolling to reduce overhead"), separates it unless the scorer,
                    # the detail or the code point elsewhere.
                    contained = index.containment(name)
                    if contained is None or containment_conflict(
                        ranked, contained, detail=bool(step.detail.strip())
                    ):
                        verdict = "undecided"
                        flags.append(reason)
            elif verdict == "undecided":
                # Below the merge threshold or margin, a name that contains the best candidate's label
                # with only generic words around it is still evidence enough, when nothing disagrees.
                contained = index.containment(name)
                if contained is not None and not containment_conflict(
                    ranked, contained, detail=bool(step.detail.strip())
                ):
                    verdict = "merge"
            elif verdict == "new":
                # A new technique needs a name made of words: one no dictionary and no technique knows
                # ("Zorbification of the inner loop") is queued for a curator.
                strange = strange_words(name, index.vocabulary_words())
                if strange:
                    verdict = "undecided"
                    flags.append(f"name_not_understood: no technique and no dictionary knows {strange}")
            top = ranked.top
            # (session 26) A kind of a technique ("horizontal_input_fusion", "copy_fusion": the head
            # of a kind, `KIND_HEADS`, and words that name no other technique) is that technique when
            # nothing else disagrees, whatever the probability; a merge elsewhere waits for a curator.
            kind = index.kind_of(name)
            if kind is not None and not strange_words(name, index.vocabulary_words()):
                conflict = kind_conflict(ranked, kind, detail=bool(step.detail.strip()))
                if verdict == "merge" and top is not None and top[0] != kind:
                    verdict = "undecided"
                    flags.append(
                        f"kind_disagrees: the name is a kind of {kind!r}, the scorer says {top[0]!r}"
                    )
                elif conflict is None:
                    verdict = "merge"
                    flags[:] = [f for f in flags if not f.startswith(_SEPARATION_FLAGS)]
                    top = (kind, ranked.probabilities[ranked.names.index(kind)])
            # (session 32) The nearest labelled name written outside the team (`search.relabel.examples`):
            # a waiting or new step merges into its technique at EXAMPLE_MERGE; a waiting step whose
            # nearest example names no taxonomy technique is new at EXAMPLE_NEW.
            bank = self.example_bank() if verdict in ("undecided", "new") else None
            near = bank.nearest(self.vectors.get(step.text.embedded_name())) if bank is not None else None
            if near is not None and not any(f.startswith("name_not_understood") for f in flags):
                example, cosine = near
                taken = False
                if example.technique is not None and cosine >= EXAMPLE_MERGE:
                    verdict, taken = "merge", True
                    top = (example.technique, top[1] if top is not None else 0.0)
                elif (
                    example.technique is None
                    and verdict == "undecided"
                    and cosine >= EXAMPLE_NEW
                    and top is not None
                    and next((c.concept for c in index.candidates if c.name == top[0]), None) is not None
                ):
                    # only where the best candidate is a taxonomy technique: a graph's own technique
                    # (a curator's) may be what the example's source meant
                    verdict, taken = "new", True
                if taken:
                    flags[:] = [f for f in flags if not f.startswith(_SEPARATION_FLAGS)]
                    example_note = {
                        "name": example.name,
                        "technique": example.technique,
                        "cosine": round(cosine, 4),
                    }
            if verdict == "merge" and top is not None:
                choice = self._concept_choice(top[0], index, "model", evidence, ranked)
            elif verdict == "new":
                choice = RelabelChoice("new", name, "model", ranked=ranked, evidence=evidence)
            else:
                choice = RelabelChoice("undecided", name, "model", ranked=ranked, evidence=evidence)
        if choice.outcome != "undecided":
            # A name that turns against a technique's own label ("Avoid shared memory tiling") is not that
            # technique, and what it is instead is for a curator to say: never merged into it, never
            # created silently. A merge elsewhere stands ("Replace ... tiling with register tiling").
            against = index.contradicted(name)
            said = against.get(choice.technique)
            if said is None and against and choice.outcome == "new" and choice.canonical is None:
                said = next(iter(against.values()))
            if said is not None:
                flags.append(
                    f"name_contradicts: the name says {said}, a label of {choice.technique!r}"
                    if choice.technique in against
                    else f"name_contradicts: the name says {said}"
                )
                choice = RelabelChoice("undecided", name, "model", ranked=choice.ranked, evidence=evidence)
        if choice.names_technique:
            # A name about looking at a program ("Divergence profiling", "Bank conflict detection") is a
            # tool or a study of the technique, not the technique: a curator decides (issue 28).
            studied = index.diagnostic(name, choice.technique)
            if studied is not None:
                flags.append(
                    f"name_diagnostic: the name's {studied!r} studies a program, no word of {choice.technique!r}"
                )
                choice = RelabelChoice("undecided", name, "model", ranked=choice.ranked, evidence=evidence)
        if choice.names_technique and choice.decided_by == "model":
            # (session 23) The name itself writes a GPU API identifier of other techniques and none of the
            # chosen one's ("warp.sum() Essentials" is not the warp scan, whatever its embedding says):
            # name and scorer disagree, a curator decides (issue 28, precision first).
            named = index.named(name)
            if named and choice.technique not in named:
                flags.append(
                    "name_mentions_other: the name writes "
                    + ", ".join(f"{m!r} of {t!r}" for t, m in sorted(named.items()))
                    + f", nothing of {choice.technique!r}"
                )
                choice = RelabelChoice("undecided", name, "model", ranked=choice.ranked, evidence=evidence)
        if choice.names_technique and choice.decided_by == "model" and evidence is None:
            # A topic heading or an advice against something that lacks the chosen technique's own
            # naming words is broader than that technique ("L2 Cache Optimizations" is not L2 cache
            # persistence): neither merged into it nor its canonical created, a curator decides
            # (issue 28).
            chosen = next((c for c in index.candidates if c.name == choice.technique), None)
            labels = (choice.technique, *(chosen.labels if chosen is not None else ()))
            lacking = generic_name(name, labels, step.detail)
            if lacking:
                flags.append(
                    f"name_generic: the name is a topic or an advice without {', '.join(lacking)} of "
                    f"{choice.technique!r}"
                )
                choice = RelabelChoice("undecided", name, "model", ranked=choice.ranked, evidence=evidence)
        if (
            choice.names_technique
            and choice.decided_by == "model"
            and evidence is None
            and not step.detail.strip()
        ):
            # (session 27) A name of one content word, with nothing else to go on, names one technique only
            # by a word of that technique's own names that few techniques' names share: "Multiple
            # Devices" merged into host-device transfer reduction (p 0.96) on "device", a word of five
            # techniques' names (issue 28, precision first).
            lone = index.lone_word(name, choice.technique)
            if lone is not None:
                flags.append(f"name_one_word: {lone}")
                choice = RelabelChoice("undecided", name, "model", ranked=choice.ranked, evidence=evidence)
        if choice.outcome == "merge" and evidence is not None and evidence.parsed:
            target = next((c for c in index.candidates if c.name == choice.technique), None)
            if (
                target is not None
                and target.mentions
                and target.evidence
                and not (target.evidence & (evidence.introduced | evidence.present_after))
            ):
                flags.append(f"evidence_missing: the code shows none of {sorted(target.evidence)}")
        return RelabelChoice(
            choice.outcome,
            choice.technique,
            choice.decided_by,
            canonical=choice.canonical,
            ranked=choice.ranked,
            evidence=evidence,
            flags=tuple(flags),
            example=example_note if choice.outcome != "undecided" else None,
        )

    def _concept_choice(
        self,
        name: str,
        index: CandidateIndex,
        decided_by: str,
        evidence: CodeEvidence | None,
        ranked: Ranked | None,
    ) -> RelabelChoice:
        """Merge into the graph technique `name` is (or is linked to), or create the taxonomy technique."""
        for candidate in index.candidates:
            if candidate.in_graph and (candidate.name == name or candidate.concept == name):
                return RelabelChoice("merge", candidate.name, decided_by, ranked=ranked, evidence=evidence)
        assert self.taxonomy is not None, "only taxonomy candidates can be missing from the graph"
        concept = self.taxonomy.get(name)
        canonical = Technique(
            name=concept.name,
            description=concept.description,
            aliases=[],
            embedding=self.vectors.get(technique_text(concept.name, concept.description)).tolist(),
            created_at=utc_now(),
            created_by="taxonomy",
        )
        return RelabelChoice(
            "new", concept.name, decided_by, canonical=canonical, ranked=ranked, evidence=evidence
        )


@dataclass
class RelabelSession:
    """Relabeling for one batch (one trajectory): what it will create is visible to its later steps."""

    relabeler: Relabeler
    new_techniques: list[Technique] = field(default_factory=list)
    aliases: list[AliasAddition] = field(default_factory=list)
    decisions: list[RelabelDecision] = field(default_factory=list)
    _index: CandidateIndex | None = None
    _known: dict[str, str] = field(default_factory=dict)
    _labels: dict[str, str] | None = None
    _techniques: list[Technique] | None = None

    def _graph(self) -> list[Technique]:
        if self._techniques is None:
            self._techniques = self.relabeler.graph_techniques()
        return self._techniques

    def _exact_labels(self) -> dict[str, str]:
        """Every graph technique's name and alias (case folded) -> its name: one listing per session
        instead of one store query per step."""
        if self._labels is None:
            self._labels = {}
            for technique in self._graph():
                for label in (technique.name, *technique.aliases):
                    self._labels.setdefault(normalize_label(label).lower(), technique.name)
        return self._labels

    def _candidates(self) -> CandidateIndex:
        if self._index is None:
            self._index = self.relabeler.candidate_index(self._graph())
        return self._index

    def prepare(self, steps: Sequence[Any]) -> None:
        """Embed, in one batch, what deciding the steps (objects with method/detail/think) will need.

        Steps named exactly like a graph technique need nothing; the others need "name: detail" (kept
        with the decision), and their name too when no label or taxonomy hit decides them.
        """
        known = self._exact_labels()
        pending = [
            StepInput(normalize_label(s.method), s.detail, s.think)
            for s in steps
            if normalize_label(s.method) and normalize_label(s.method).lower() not in known
        ]
        if pending:
            self.relabeler.policy.prepare(pending, self._candidates())

    def resolve(
        self,
        label: str,
        description: str = "",
        *,
        think: str = "",
        code_before: str | None = None,
        code_after: str | None = None,
    ) -> str:
        """The technique name `label` maps to, deciding (and recording) a relabel when needed.

        `description` is the step's detail; `think` and the code before/after the step are evidence too.
        Raises `RelabelError` for an empty name (nothing is recorded then); a name that cannot name a
        technique (`name_problem`: one character, punctuation, filler only, too long, mixed scripts) is
        queued with its reason.
        """
        name = normalize_label(label)
        if not name:
            raise RelabelError("a method name is empty")
        folded = name.lower()
        if folded in self._known:
            return self._known[folded]
        if folded == INITIAL_TECHNIQUE:
            self._known[folded] = INITIAL_TECHNIQUE
            return INITIAL_TECHNIQUE
        existing = self._exact_labels().get(folded)
        if existing is not None:
            self._known[folded] = existing
            return existing
        step = StepInput(name, description, think, code_before, code_after)
        target = self._decide(step)
        self._known[folded] = target
        return target

    def _decide(self, step: StepInput) -> str:
        rl = self.relabeler
        index = self._candidates()
        choice = rl.policy.choose(step, index)
        vector = rl.policy.vectors.get(step.text.embedded_text()).tolist()
        ranked = choice.ranked
        in_graph = {c.name for c in index.candidates if c.in_graph}
        matched: str | None = None
        score: float | None = None
        if choice.decided_by != "model":
            # An alias or taxonomy hit: the match is the technique itself (nothing nearer to undo into
            # when the hit created it).
            if choice.outcome == "merge":
                matched, score = choice.technique, 1.0
        elif ranked is not None:
            # The nearest technique already in the graph other than the chosen one: what an undo of a
            # new technique merges it into, and what a merge matched.
            for name, probability in zip(ranked.names, ranked.probabilities, strict=True):
                if name in in_graph and (choice.outcome == "merge" or name != choice.technique):
                    matched, score = name, probability
                    break
        judge_answer: dict[str, Any] | None = None
        judge_failure: dict[str, Any] | None = None
        outcome_kind, target, decided_by = choice.outcome, choice.technique, choice.decided_by
        canonical = choice.canonical
        if outcome_kind == "undecided" and rl.judge is not None and ranked is not None:
            options = judge_options(ranked, rl.policy.model.new_threshold, rl.candidates)
            decided_by = "judge"
            try:
                judge_answer = rl.judge(step.name, step.detail[:MAX_DESCRIPTION_CHARS], options)
                judged, judged_target = self._check_judge(step.name, options, judge_answer)
                if judged is RelabelOutcome.MERGED:
                    concept_choice = rl.policy._concept_choice(
                        judged_target, index, "judge", choice.evidence, ranked
                    )
                    outcome_kind, target, canonical = (
                        concept_choice.outcome,
                        concept_choice.technique,
                        concept_choice.canonical,
                    )
                else:
                    outcome_kind, target = "new", step.name
            except JudgeError as e:
                logger.warning(
                    "relabel judge failed; queueing", extra={"candidate": step.name, "error": str(e)}
                )
                judge_answer = {"error": str(e)}
                # The judge decided nothing: the rule that left the name undecided sent it to the queue,
                # and the judge's failure is its evidence (session 38 recorded "judge" here).
                decided_by = choice.decided_by
                judge_failure = {"options": options, "error": str(e)}
        flags = list(choice.flags)
        if outcome_kind == "merge":
            outcome = RelabelOutcome.MERGED
            self.aliases.append(AliasAddition(technique=target, alias=step.name))
        else:
            outcome = RelabelOutcome.NEW if outcome_kind == "new" else RelabelOutcome.FLAGGED
            if canonical is not None:
                technique = canonical.model_copy(
                    update={"aliases": [step.name] if step.name != canonical.name else []}
                )
            else:
                technique = Technique(
                    name=target,
                    description=construction_description(step),
                    embedding=vector,
                    created_at=utc_now(),
                    created_by="relabel",
                )
            self.new_techniques.append(technique)
            index.add(technique_candidates([technique], rl.policy.taxonomy)[0])
        if flags and outcome is not RelabelOutcome.FLAGGED:
            decided_note = "flagged for a curator: " + "; ".join(flags)
            logger.info(decided_note, extra={"candidate": step.name})
        evidence = choice.evidence_json()
        evidence["flags"] = flags
        if judge_failure is not None:
            evidence["judge"] = judge_failure
        self.decisions.append(
            RelabelDecision(
                id=uuid.uuid4().hex,
                candidate=step.name,
                candidate_description=step.detail[:MAX_DESCRIPTION_CHARS],
                candidate_embedding=vector,
                matched=matched,
                score=score,
                outcome=outcome,
                technique=target,
                decided_by=decided_by,
                judge_answer=judge_answer,
                at=utc_now(),
                flags=flags,
                evidence=evidence,
            )
        )
        logger.info(
            "relabel decision",
            extra={"candidate": step.name, "outcome": outcome.value, "technique": target, "score": score},
        )
        return target

    @staticmethod
    def _check_judge(name: str, options: list[str], answer: dict[str, Any]) -> tuple[RelabelOutcome, str]:
        existed = answer.get("existed")
        method = answer.get("method")
        if not isinstance(existed, bool) or not isinstance(method, str):
            raise JudgeError(f"the judge's answer lacks existed/method: {answer!r}")
        if not existed:
            return RelabelOutcome.NEW, name
        # Like the paper: a relabel onto a method that is not among the offered ones is refused.
        for option in options:
            if option.lower() == normalize_label(method).lower():
                return RelabelOutcome.MERGED, option
        raise JudgeError(f"the judge named {method!r}, which is not one of the offered methods {options}")


MAX_DESCRIPTION_CHARS = 2000
"""A technique made by construction is described by (at most this much of) the step's detail."""


def construction_description(step: StepInput) -> str:
    """The description of a technique created from a step: its detail (or think), cut to a paragraph."""
    text = " ".join((step.detail or step.think).split())
    return text[:MAX_DESCRIPTION_CHARS]


class Relabeler:
    """Relabeling policy over a store and an embedder; open one `session()` per trajectory."""

    def __init__(
        self,
        store: TechniqueReader,
        embedder: Embedder,
        *,
        judge: Judge | None = None,
        candidates: int = 5,
        taxonomy: Taxonomy | Literal["default"] | None = "default",
        model: ScoringModel | None = None,
    ) -> None:
        """Relabel against `store` with the fitted scorer (`model`, default: the committed one).

        `taxonomy`: background knowledge (default: the packaged taxonomy; None: none). `judge`: asked
        for undecided steps, `candidates` options at most.
        """
        self.store = store
        self.embedder = embedder
        self.judge = judge
        self.candidates = candidates
        resolved = default_taxonomy() if taxonomy == "default" else taxonomy
        self.policy = RelabelPolicy(embedder, taxonomy=resolved, model=model or load_model())
        self._index_lock = threading.Lock()
        self._cached_index: tuple[tuple[tuple[str, str, tuple[str, ...]], ...], CandidateIndex] | None = None

    def candidate_index(self, techniques: list[Technique]) -> CandidateIndex:
        """A private copy of the candidate index of `techniques` (built once while they are unchanged)."""
        key = tuple((t.name, t.description, tuple(t.aliases)) for t in techniques)
        with self._index_lock:
            cached = self._cached_index
        if cached is None or cached[0] != key:
            cached = (key, self.policy.index(techniques))
            with self._index_lock:
                self._cached_index = cached
        return cached[1].copy()

    def graph_techniques(self) -> list[Technique]:
        """Every technique of the graph (pages of the store's listing)."""
        out: list[Technique] = []
        page = 500
        while True:
            batch = self.store.list_techniques(limit=page, offset=len(out))
            out.extend(batch)
            if len(batch) < page:
                return out

    def prepare(self, steps: Sequence[Any]) -> None:
        """Embed the names and details of many steps (objects with method/detail/think) in one batch."""
        self.policy.prepare(
            [
                StepInput(normalize_label(s.method), s.detail, s.think)
                for s in steps
                if normalize_label(s.method)
            ]
        )

    def session(self) -> RelabelSession:
        """A fresh session for one batch (it lists the graph's techniques once, when first needed)."""
        return RelabelSession(self)


class RelabelConfig(BaseSettings):
    """Relabeling settings, from the environment (`REGRAPH_TAXONOMY`, `REGRAPH_RELABEL_MODEL`...)."""

    model_config = SettingsConfigDict(env_prefix="REGRAPH_", extra="ignore")

    taxonomy: str = Field(
        default="default",
        description='the taxonomy used as knowledge and to seed an empty graph: "default" (packaged), "none", or a path',
    )
    relabel_model: Path | None = Field(
        default=None, description="a fitted scorer file (default: the packaged one)"
    )
    relabel_candidates: int = Field(default=5, ge=1, le=20, description="options offered to the judge")

    def resolved_taxonomy(self) -> Taxonomy | None:
        """The taxonomy the setting names (None for "none")."""
        return taxonomy_setting(self.taxonomy)


def role_judge(roles: ModelRoles | None = None) -> Judge | None:
    """The judge of the `judge` model role (`REGRAPH_MODELS__JUDGE__*`), None where it is unset. A role
    whose backend cannot hold an answer to `JUDGE_SCHEMA` is refused (`require_structured_output`): built,
    such a judge fails every question, and every name it was to decide would wait in the queue behind a
    warning (session 38, the packaged model). Call it before any long work (`regraph graph build` does,
    before its teacher is asked), so that the refusal comes first."""
    role = (roles or ModelRoles()).judge
    if role is None:
        return None
    require_structured_output(
        "judge",
        role,
        otherwise=", or leave the judge role unset (undecided names then wait in the curator queue)",
    )
    return ChatModelJudge(build_model(role))


def build_relabeler(
    store: TechniqueReader,
    embedder: Embedder,
    *,
    config: RelabelConfig | None = None,
    roles: ModelRoles | None = None,
    judge: Judge | None = None,
) -> Relabeler:
    """The relabeler every graph-building path uses: the settings' taxonomy and scorer, and the judge.

    The judge is `judge` when given, else the `judge` model role (`REGRAPH_MODELS__JUDGE__*`) when set,
    else none (undecided names then wait in the curator queue).
    """
    settings = config or RelabelConfig()
    if judge is None:
        judge = role_judge(roles)
    return Relabeler(
        store,
        embedder,
        judge=judge,
        candidates=settings.relabel_candidates,
        taxonomy=settings.resolved_taxonomy(),
        model=load_model(settings.relabel_model) if settings.relabel_model else None,
    )


# -- likely duplicates: pairs of graph techniques the relabeler would merge ----------------------------


@dataclass
class PairScores:
    """Likely duplicate pairs (names in order) with probability and reasons, and what was left out."""

    pairs: dict[tuple[str, str], tuple[float, frozenset[str]]] = field(default_factory=dict)
    taxonomy_apart: int = 0
    """Scorer pairs left out because the two are different taxonomy techniques."""
    held_back: int = 0
    """Scorer pairs from `min_probability` that the relabel rule would not merge, or (`pair_rule` `mutual`,
    `both`) that the other way does not confirm."""


PairRule = Literal["either", "mutual", "both"]
PAIR_RULES: tuple[PairRule, ...] = ("either", "mutual", "both")
"""How a scorer pair is proposed (`pair_scores`): `either` (session 33 and before: one technique would be
merged into the other, shown at that direction's probability), `mutual` (the default: that, and the other
technique's nearest is the first, shown at the lower of the two directions' probabilities), `both` (each
would be merged into the other, shown at the lower probability)."""


def pair_scores(
    policy: RelabelPolicy,
    candidates: tuple[TechniqueCandidate, ...],
    min_probability: float,
    *,
    rule: bool = True,
    pair_rule: PairRule = "mutual",
) -> PairScores:
    """The pairs of `candidates` (graph techniques) that name one technique.

    Certain (1.0): both are linked to one taxonomy technique, or a label of one normalises like a
    label of the other. Otherwise each technique's name and description is read as a step against all
    the others, and a pair is proposed when the relabeler would merge one step into the other
    technique (the model's thresholds and margin say merge and the separation gate passes; `rule`,
    `rule=False` gives the bare scorer pairs, for comparison) and, by `pair_rule` (`PAIR_RULES`), the
    other technique's own best candidate is the first (`mutual`, the default) or the relabeler would
    merge it into the first too (`both`). Being the same technique goes both ways, so such a pair's
    probability is the lower of the two directions' (with `either`, the merging direction's): a
    general technique read as a step is often nearest to one of its kinds ("Atomic operation
    optimization" merged into "Warp-aggregated atomics" at p 0.91) while the kind is nearer to a
    sibling or is only a weak match back. A pair whose probability falls below `min_probability` is
    not proposed. Two techniques linked to different taxonomy techniques are never proposed by the
    scorer: the taxonomy keeps them apart.
    """
    out = PairScores()

    def note(a: str, b: str, probability: float, reason: str) -> None:
        key = (a, b) if a < b else (b, a)
        previous, reasons = out.pairs.get(key, (0.0, frozenset()))
        out.pairs[key] = (max(previous, probability), reasons | {reason})

    keys = [{label_key(label) for label in c.labels if label_key(label)} for c in candidates]
    for i, a in enumerate(candidates):
        for j in range(i + 1, len(candidates)):
            b = candidates[j]
            if a.concept is not None and a.concept == b.concept:
                note(a.name, b.name, 1.0, f"both are the taxonomy technique {a.concept!r}")
            elif keys[i] & keys[j]:
                note(a.name, b.name, 1.0, "a name or alias of one is written like one of the other")
    steps = [StepText(c.name, c.description) for c in candidates]
    policy.vectors.ensure([s.embedded_name() for s in steps] + [s.embedded_text() for s in steps])
    # Each technique read as a step: the others by probability, and whether the rule merges it into the best.
    directions: dict[str, tuple[Ranked, bool]] = {}
    for i, others, probabilities, features in _scored_rows(policy, candidates, steps):
        me = candidates[i]
        order = sorted(range(len(others)), key=lambda k: (-probabilities[k], others[k].name))
        ranked = Ranked(
            tuple(others[k].name for k in order),
            tuple(float(probabilities[k]) for k in order),
            tuple(tuple(float(v) for v in features[k]) for k in order),
        )
        merges = (
            rule
            and decide(policy.model, ranked) == "merge"
            and separation(ranked, name_words=len(set(concept_tokens(me.name))), detail=bool(me.description))
            is None
        )
        directions[me.name] = (ranked, merges)
    concepts = {c.name: c.concept for c in candidates}
    apart: set[tuple[str, str]] = set()
    held: set[tuple[str, str]] = set()
    for name, (ranked, merges) in directions.items():
        for position, (other, p) in enumerate(zip(ranked.names, ranked.probabilities, strict=True)):
            if p < min_probability:
                break
            pair = (name, other) if name < other else (other, name)
            if out.pairs.get(pair, (0.0, frozenset()))[0] == 1.0:
                continue
            mine, theirs = concepts[name], concepts[other]
            if rule and mine is not None and theirs is not None and mine != theirs:
                apart.add(pair)
                continue
            if not rule:
                note(name, other, p, "the relabel scorer")
                continue
            if position != 0 or not merges:
                held.add(pair)
                continue
            reason = (
                f"the relabel rule would merge {name!r} into {other!r} (p {p:.2f}, "
                f"lead {ranked.gap:.2f} over {ranked.names[1] if len(ranked.names) > 1 else 'nothing'})"
            )
            if pair_rule == "either":
                note(name, other, p, reason)
                continue
            back, back_merges = directions[other]
            back_p = back.probabilities[back.names.index(name)]
            if back.names[0] != name or (pair_rule == "both" and not back_merges) or back_p < min_probability:
                held.add(pair)
                continue
            note(
                name,
                other,
                min(p, back_p),
                reason + f"; {name!r} is the technique nearest to {other!r} (p {back_p:.2f})",
            )
    out.taxonomy_apart = len(apart)
    out.held_back = len(held - set(out.pairs))
    return out


EXAMPLES_READ = 8
"""Examples read per technique to learn what its code changes show (the graph's own evidence)."""


def characteristic_signals(changes: list[tuple[str, str]]) -> frozenset[str]:
    """The code-evidence signals that at least half of a technique's examples (code before, after)
    introduce: what its steps do, in the graph's own data."""
    counts: Counter[str] = Counter()
    parsed = 0
    for before, after in changes:
        evidence = code_evidence(before, after)
        if evidence.parsed:
            parsed += 1
            counts.update(evidence.introduced)
    return frozenset(signal for signal, n in counts.items() if parsed and 2 * n >= parsed)


def code_disagrees(first: frozenset[str], second: frozenset[str]) -> bool:
    """Whether two techniques' examples show different changes (each shows some, none in common)."""
    return bool(first) and bool(second) and not first & second


def _scored_rows(
    policy: RelabelPolicy, candidates: tuple[TechniqueCandidate, ...], steps: list[StepText]
) -> Iterator[
    tuple[
        int,
        list[TechniqueCandidate],
        np.ndarray[Any, np.dtype[np.float64]],
        np.ndarray[Any, np.dtype[np.float64]],
    ]
]:
    """`scorer_rows` with each row's feature matrix."""
    if len(candidates) < 2:
        return
    index = CandidateIndex(list(candidates), policy.vectors)
    name_col, text_col, gap_col = (FEATURES.index(f) for f in ("name_sim", "text_sim", "rank_gap"))
    for i, step in enumerate(steps):
        features = index.features(
            step,
            None,
            policy.vectors.get(step.embedded_name()),
            policy.vectors.get(step.embedded_text()),
        )
        rows = np.delete(features, i, axis=0)
        blend = 0.5 * rows[:, name_col] + 0.5 * rows[:, text_col]
        rows[:, gap_col] = float(np.max(blend)) - blend
        yield i, [*candidates[:i], *candidates[i + 1 :]], policy.model.probabilities(rows), rows


def scorer_rows(
    policy: RelabelPolicy, candidates: tuple[TechniqueCandidate, ...], steps: list[StepText]
) -> Iterator[tuple[int, list[TechniqueCandidate], np.ndarray[Any, np.dtype[np.float64]]]]:
    """For each technique i (its name and description as `steps[i]`): the others and the scorer's probabilities.

    The scorer's choice for step i is among all the other techniques, so each row is computed
    against an index of the others. Building n such indexes was the first look's cost (each
    tokenises every label again: ~3 s for 67 techniques); one index over all of them gives the
    same features (to float rounding, ~1e-7 in a probability): without code evidence, every feature of a
    pair but the rank gap reads only the step and that candidate, and the rank gap (the best blend among
    the others minus this one's) is recomputed here without the step itself.
    tests/integration/api/test_duplicate_scoring.py holds this to the per-step indexes on the seed
    graph's techniques.
    """
    for i, others, probabilities, _ in _scored_rows(policy, candidates, steps):
        yield i, others, probabilities
