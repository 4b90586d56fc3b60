"""Replay and record model answers, so the whole pipeline can run with no model weights.

Replay file format ``regraph.replay/v1``: JSON Lines, one record per line::

    {"format": "regraph.replay/v1",
     "key": "sha256:<hex>",                       # optional: exact request hash (see request_key)
     "match": {"prompt": "step", "task": "saxpy", "technique": "Tiling"},   # optional
     "prompt_contains": "some text",              # optional
     "completion": "the answer text",
     "model": "who produced it",                  # optional, reported as Completion.model
     "prompt_tokens": 812, "completion_tokens": 301}   # optional, estimated as chars/4 when absent

A record matches a request when every condition it states holds: `key` equals the request hash;
every `match` field equals the same field of the prompt's regraph header (`search.header`);
`prompt_contains` is a substring of some message. A record stating no condition matches everything
(a catch-all). Among matching records the most specific wins — a key beats a header match, a header
match with more fields beats one with fewer, a `prompt_contains` breaks the remaining tie — and then
the first in file order. Matching is deterministic and ignores temperature and seed. Every replayed
`Completion` has ``backend="replay"``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from search.backends.base import (
    ChatMessage,
    ChatModel,
    Completion,
    ModelUnavailableError,
    ReplayMissError,
)
from search.header import parse_header

logger = logging.getLogger(__name__)

REPLAY_FORMAT = "regraph.replay/v1"


class ReplayRecord(BaseModel):
    """One line of a replay file."""

    model_config = ConfigDict(extra="forbid")

    format: str = REPLAY_FORMAT
    key: str | None = None
    match: dict[str, str | int | float | bool] | None = None
    prompt_contains: str | None = None
    completion: str
    model: str | None = None
    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)

    def specificity(self) -> tuple[int, int, int]:
        """Sort key: more specific records win."""
        return (self.key is not None, len(self.match or {}), self.prompt_contains is not None)


def request_key(messages: list[ChatMessage]) -> str:
    """The exact-match key of a request: SHA-256 over the roles and contents of its messages."""
    canonical = json.dumps([[m.role, m.content] for m in messages], ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def request_header(messages: list[ChatMessage]) -> dict[str, Any] | None:
    """The regraph header of the last user message that has one."""
    for message in reversed(messages):
        if message.role == "user":
            header = parse_header(message.content)
            if header is not None:
                return header
    return None


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def load_replay(path: Path) -> list[ReplayRecord]:
    """Read and validate a replay file."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise ModelUnavailableError(f"cannot read replay file {path}: {e}") from e
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = ReplayRecord.model_validate_json(line)
        except ValidationError as e:
            raise ModelUnavailableError(f"{path}:{number}: not a replay record: {e}") from e
        if record.format != REPLAY_FORMAT:
            raise ModelUnavailableError(f"{path}:{number}: unknown format {record.format!r}")
        records.append(record)
    return records


class ReplayModel:
    """Answers from recorded completions; see the module docstring for the format and matching."""

    def __init__(self, records: Iterable[ReplayRecord], *, name: str = "replay") -> None:
        """Serve `records`; `name` is reported as the model when a record names none."""
        self.records = list(records)
        self.name = name

    @classmethod
    def from_file(cls, path: Path | str) -> ReplayModel:
        """Load a replay file (``regraph.replay/v1`` JSON Lines)."""
        path = Path(path)
        return cls(load_replay(path), name=f"replay:{path.name}")

    def find(self, messages: list[ChatMessage]) -> ReplayRecord:
        """The record that answers `messages`; raises `ReplayMissError` when none matches."""
        key = request_key(messages)
        header = request_header(messages) or {}
        best: ReplayRecord | None = None
        for record in self.records:
            if record.key is not None and record.key != key:
                continue
            if record.match is not None and any(header.get(f) != v for f, v in record.match.items()):
                continue
            if record.prompt_contains is not None and not any(
                record.prompt_contains in m.content for m in messages
            ):
                continue
            if best is None or record.specificity() > best.specificity():
                best = record
        if best is None:
            raise ReplayMissError(f"no replay record for header {header or None} (key {key[:19]}...)")
        return best

    async def complete(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """Answer from the best matching record (sampling settings are ignored)."""
        record = self.find(messages)
        prompt_tokens = record.prompt_tokens
        if prompt_tokens is None:
            prompt_tokens = sum(_estimate_tokens(m.content) for m in messages)
        completion_tokens = record.completion_tokens
        if completion_tokens is None:
            completion_tokens = _estimate_tokens(record.completion)
        return Completion(
            text=record.completion,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            model=record.model or self.name,
            backend="replay",
            finish_reason="stop",
        )

    async def aclose(self) -> None:
        """Nothing to release."""


class RecordingModel:
    """Wraps another backend and appends every exchange to a replay file (keyed exactly, plus header)."""

    def __init__(self, inner: ChatModel, path: Path | str) -> None:
        """Record `inner`'s answers to `path` (appending)."""
        self.inner = inner
        self.path = Path(path)

    async def complete(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """Forward to the wrapped backend, then append the exchange to the replay file."""
        completion = await self.inner.complete(
            messages, max_tokens=max_tokens, temperature=temperature, seed=seed, json_schema=json_schema
        )
        header = request_header(messages) or {}
        scalars = {k: v for k, v in header.items() if isinstance(v, str | int | float | bool)}
        record = ReplayRecord(
            key=request_key(messages),
            match=scalars or None,
            completion=completion.text,
            model=completion.model,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
        )
        with self.path.open("a", encoding="utf-8") as out:
            out.write(record.model_dump_json(exclude_none=True) + "\n")
        return completion

    async def aclose(self) -> None:
        """Close the wrapped backend."""
        await self.inner.aclose()


class _TrajectoryStep(BaseModel):
    method: str
    think: str = ""
    detail: str = ""
    code: str


class _Trajectory(BaseModel):
    format: str = "regraph.trajectory/v1"
    task_id: str
    model: str = "unknown"
    steps: list[_TrajectoryStep]


def teacher_answer(think: str, code: str) -> str:
    """The answer text a replayed step returns: the teacher's reasoning, then the code in a fence."""
    return f"{think.strip()}\n\n```cuda\n{code.rstrip()}\n```\n"


def records_from_trajectories(
    lines: Iterable[str], *, one_shot_from_final: bool = False
) -> list[ReplayRecord]:
    """Replay records answering the step policy from teacher trajectories (``regraph.trajectory/v1``).

    A step with method M of task T answers step prompts whose header has ``task=T, technique=M``
    (whatever the step number and retrieved examples), with that step's think and code. With
    `one_shot_from_final`, the one-shot prompts (standard, cot, rag) of T are answered with the final
    step's code — off by default because it makes those baselines as good as the teacher.
    """
    records: list[ReplayRecord] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            trajectory = _Trajectory.model_validate_json(line)
        except ValidationError as e:
            raise ModelUnavailableError(f"trajectory line {number}: {e}") from e
        for step in trajectory.steps:
            records.append(
                ReplayRecord(
                    match={"prompt": "step", "task": trajectory.task_id, "technique": step.method},
                    completion=teacher_answer(step.think, step.code),
                    model=f"trajectory:{trajectory.model}",
                )
            )
        if one_shot_from_final and trajectory.steps:
            final = trajectory.steps[-1]
            for prompt in ("standard", "cot", "rag"):
                records.append(
                    ReplayRecord(
                        match={"prompt": prompt, "task": trajectory.task_id},
                        completion=teacher_answer(final.think, final.code),
                        model=f"trajectory:{trajectory.model}",
                    )
                )
    return records


def write_replay(records: Iterable[ReplayRecord], path: Path | str) -> int:
    """Write `records` as a replay file; returns how many were written."""
    count = 0
    with Path(path).open("w", encoding="utf-8") as out:
        for record in records:
            out.write(record.model_dump_json(exclude_none=True) + "\n")
            count += 1
    logger.info("wrote %d replay records to %s", count, path)
    return count
