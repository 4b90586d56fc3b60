"""Relabeling: map a method name written in a trajectory onto the graph's techniques.

An exact name or alias match (ignoring case) is used as is. Otherwise "name: description" is
embedded and compared with every technique through the vector index:

- similarity >= `merge_threshold`: the name becomes an alias of the nearest technique;
- similarity < `new_threshold`: a new technique;
- in between: a configured `Judge` (an LLM) picks among the nearest techniques, and its answer is
  checked like in the paper (a "same as" that names a method not offered is refused); with no judge,
  or a refused answer, the name is kept as a new technique and flagged for curators.

Every non-exact decision is recorded as a `RelabelDecision` (and can be undone through the store).
Within one trajectory the session also sees the techniques and aliases it is about to create.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from graphdb.models import AliasAddition, RelabelDecision, RelabelOutcome, Technique, utc_now
from graphdb.store import GraphStore
from search.backends.base import ChatMessage, ChatModel, ModelError
from search.embeddings import Embedder, technique_text
from search.errors import SearchError
from search.protocols import INITIAL_TECHNIQUE

logger = logging.getLogger(__name__)


class RelabelError(SearchError):
    """A method name cannot be relabeled (empty, or the thresholds make no sense)."""


class JudgeError(SearchError):
    """The judge could not answer; the relabeler then flags the name for curators."""


class Judge(Protocol):
    """Decides whether `candidate` names one of `options`; answers {"existed": bool, "method": str}."""

    def __call__(self, candidate: str, description: str, options: list[str]) -> dict[str, Any]: ...


JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"existed": {"type": "boolean"}, "method": {"type": "string"}},
    "required": ["existed", "method"],
    "additionalProperties": False,
}


class ChatModelJudge:
    """A `Judge` asking a chat model; call it from a thread without a running event loop."""

    def __init__(self, model: ChatModel, *, max_tokens: int = 200) -> None:
        """Ask `model` (any backend) with a JSON-schema-constrained answer."""
        self.model = model
        self.max_tokens = max_tokens

    def __call__(self, candidate: str, description: str, options: list[str]) -> dict[str, Any]:
        """Ask whether `candidate` is one of `options`; return the parsed JSON answer."""
        listing = "\n".join(f"- {o}" for o in options)
        prompt = (
            "You maintain a catalogue of CUDA optimization methods.\n"
            f"Known methods:\n{listing}\n\n"
            f"New method name: {candidate}\n"
            + (f"Description: {description}\n" if description else "")
            + 'Is the new method the same as one of the known methods? Answer JSON {"existed": true, '
            '"method": "<the known method, copied exactly>"} or {"existed": false, "method": "<the new name>"}.'
        )
        try:
            completion = asyncio.run(
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


def normalize_label(label: str) -> str:
    """A method name with surrounding and repeated whitespace removed."""
    return re.sub(r"\s+", " ", label).strip()


@dataclass
class _Pending:
    technique: Technique
    vector: np.ndarray[Any, np.dtype[np.float64]]


@dataclass
class RelabelSession:
    """Relabeling for one batch (one trajectory): what it will create is visible to its later steps."""

    relabeler: Relabeler
    new_techniques: list[Technique] = field(default_factory=list)
    aliases: list[AliasAddition] = field(default_factory=list)
    decisions: list[RelabelDecision] = field(default_factory=list)
    _pending: dict[str, _Pending] = field(default_factory=dict)
    _pending_alias: dict[str, str] = field(default_factory=dict)
    _known: dict[str, str] = field(default_factory=dict)

    def resolve(self, label: str, description: str = "") -> str:
        """The technique name `label` maps to, deciding (and recording) a relabel when needed."""
        name = normalize_label(label)
        if not name:
            raise RelabelError("a method name is empty")
        folded = name.lower()
        if folded in self._known:
            return self._known[folded]
        if folded in self._pending_alias:
            return self._pending_alias[folded]
        for pending in self._pending:
            if pending.lower() == folded:
                return pending
        if folded == INITIAL_TECHNIQUE:
            self._known[folded] = INITIAL_TECHNIQUE
            return INITIAL_TECHNIQUE
        existing = self.relabeler.store.find_technique_by_label(name)
        if existing is not None:
            self._known[folded] = existing.name
            return existing.name
        return self._decide(name, description)

    def _nearest(self, vector: list[float]) -> list[tuple[str, float]]:
        scored = {
            s.technique.name: s.score
            for s in self.relabeler.store.nearest_techniques(vector, self.relabeler.candidates)
            if s.technique.name != INITIAL_TECHNIQUE
        }
        query = np.asarray(vector)
        for name, pending in self._pending.items():
            scored[name] = float(pending.vector @ query)
        return sorted(scored.items(), key=lambda item: (-item[1], item[0]))[: self.relabeler.candidates]

    def _decide(self, name: str, description: str) -> str:
        rl = self.relabeler
        vector = rl.embedder.embed_one(technique_text(name, description))
        nearest = self._nearest(vector)
        matched, score = nearest[0] if nearest else (None, None)
        judge_answer: dict[str, Any] | None = None
        target = name
        if matched is not None and score is not None and score >= rl.merge_threshold:
            outcome, decided_by, target = RelabelOutcome.MERGED, "threshold", matched
        elif matched is None or score is None or score < rl.new_threshold:
            outcome, decided_by = RelabelOutcome.NEW, "threshold"
        elif rl.judge is None:
            outcome, decided_by = RelabelOutcome.FLAGGED, "threshold"
        else:
            options = [n for n, s in nearest if s >= rl.new_threshold]
            decided_by = "judge"
            try:
                judge_answer = rl.judge(name, description, options)
                outcome, target = self._check_judge(name, options, judge_answer)
            except JudgeError as e:
                logger.warning("relabel judge failed; flagging", extra={"candidate": name, "error": str(e)})
                judge_answer = {"error": str(e)}
                outcome = RelabelOutcome.FLAGGED
        if outcome is RelabelOutcome.MERGED:
            self.aliases.append(AliasAddition(technique=target, alias=name))
            self._pending_alias[name.lower()] = target
        else:
            technique = Technique(
                name=name,
                description=description,
                embedding=vector,
                created_at=utc_now(),
                created_by="relabel",
            )
            self.new_techniques.append(technique)
            self._pending[name] = _Pending(technique, np.asarray(vector))
        self.decisions.append(
            RelabelDecision(
                id=uuid.uuid4().hex,
                candidate=name,
                candidate_description=description,
                candidate_embedding=vector,
                matched=matched,
                score=score,
                outcome=outcome,
                technique=target,
                decided_by=decided_by,
                judge_answer=judge_answer,
                at=utc_now(),
            )
        )
        logger.info(
            "relabel decision",
            extra={"candidate": name, "outcome": outcome.value, "technique": target, "score": score},
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


class Relabeler:
    """Relabeling policy over a store and an embedder; open one `session()` per trajectory."""

    def __init__(
        self,
        store: GraphStore,
        embedder: Embedder,
        *,
        merge_threshold: float = 0.90,
        new_threshold: float = 0.75,
        judge: Judge | None = None,
        candidates: int = 5,
    ) -> None:
        """Thresholds are plain cosine similarities of "name: description" embeddings."""
        if not -1.0 <= new_threshold <= merge_threshold <= 1.0:
            raise RelabelError(
                f"need -1 <= new_threshold ({new_threshold}) <= merge_threshold ({merge_threshold}) <= 1"
            )
        self.store = store
        self.embedder = embedder
        self.merge_threshold = merge_threshold
        self.new_threshold = new_threshold
        self.judge = judge
        self.candidates = candidates

    def session(self) -> RelabelSession:
        """A fresh session for one batch."""
        return RelabelSession(self)
