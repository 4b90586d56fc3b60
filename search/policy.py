"""The step policy: prompts for the small model, and turning its answers into candidate code."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from search.backends.base import (
    ChatMessage,
    ChatModel,
    Completion,
    ContextLimited,
    PromptTooLongError,
    ReplayMissError,
)
from search.codeextract import TaskKind, entry_point_preserved, extract_code
from search.errors import CodeExtractionError
from search.header import format_header
from search.protocols import INITIAL_TECHNIQUE, RetrievedExample

logger = logging.getLogger(__name__)

PromptKind = Literal["step", "standard", "cot", "rag", "mcts-rag"]

SYSTEM_PROMPT = (
    "You are an expert CUDA performance engineer. You rewrite programs to run fast on NVIDIA GPUs "
    "while computing exactly the same results. You always answer with the complete program."
)


class TaskContext(BaseModel):
    """What the policy needs to know about the task being optimized."""

    id: str
    kind: TaskKind = "function"
    entry: str
    signature: str
    description: str = ""
    initial_code: str = Field(description="where the search starts: the serial C++ reference")
    kernel_signature: str | None = None
    launch: str | None = Field(default=None, description="kernel tasks: the launch configuration, in words")

    @classmethod
    def from_task_json(cls, task: dict[str, Any]) -> TaskContext:
        """Build from a ``regraph.task/v1`` object (the wire form, with ``reference_source``)."""
        kernel = task.get("kernel") or {}
        launch = None
        if kernel:
            launch = f"grid ({', '.join(kernel['grid'])}), block ({', '.join(kernel['block'])})"
        return cls(
            id=task["id"],
            kind=task.get("kind", "function"),
            entry=task["entry"],
            signature=task["signature"],
            description=task.get("description", ""),
            initial_code=task["reference_source"],
            kernel_signature=kernel.get("signature"),
            launch=launch,
        )


class PolicyConfig(BaseModel):
    """Sampling and prompt-size settings of the step policy."""

    max_tokens: int = Field(default=4096, ge=1)
    temperature: float = Field(default=0.7, ge=0.0)
    max_example_chars: int = Field(default=6000, ge=200, description="each example's code is cut to this")


class StepProposal(BaseModel):
    """The outcome of one model call: new code, or why there is none."""

    code: str | None = None
    failure: str | None = Field(default=None, description="why no usable code came back")
    failure_kind: Literal["replay_miss", "no_code", "entry_point_lost", "prompt_too_long"] | None = None
    answer: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str | None = None
    backend: str | None = None
    prompt_note: str | None = Field(default=None, description="what the prompt left out to fit the context")
    generation_s: float | None = Field(
        default=None, description="seconds generating (in-process backends) or the call's wall time"
    )

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens spent on this proposal."""
        return self.prompt_tokens + self.completion_tokens


class PromptMessages(list[ChatMessage]):
    """A prompt's chat messages, and what the builder left out of it to fit the model's context.

    `note` says which retrieved examples were dropped (None: nothing was); `fits` is False when even
    the prompt without any example is longer than the model allows (it is then never sent).
    """

    note: str | None = None
    fits: bool = True


def _context_limited(model: ChatModel) -> ContextLimited | None:
    # A recording wrapper (search.backends.replay.RecordingModel) limits what its inner model limits.
    for candidate in (model, getattr(model, "inner", None)):
        if isinstance(candidate, ContextLimited):
            return candidate
    return None


def _clip(code: str, limit: int) -> str:
    if len(code) <= limit:
        return code
    return code[:limit] + "\n// ... (truncated)\n"


class StepPolicy:
    """Builds prompts for `task`, calls `model`, and extracts and checks the code it returns."""

    def __init__(self, model: ChatModel, task: TaskContext, config: PolicyConfig | None = None) -> None:
        """Bind the policy to one model and one task."""
        self.model = model
        self.task = task
        self.config = config or PolicyConfig()

    # ---- prompt parts -------------------------------------------------------------------------

    def _contract(self) -> str:
        task = self.task
        if task.kind == "kernel":
            return (
                f"Write the CUDA kernel `{task.kernel_signature or task.entry}` (it may use `__device__` "
                f"helpers). The harness allocates device arrays, copies inputs, launches it with "
                f"{task.launch or 'a fixed configuration'} and copies outputs back. Keep the kernel's name "
                "and parameters."
            )
        return (
            f'Define `extern "C" {task.signature}` with exactly this name and parameters. Every pointer '
            "argument is a HOST pointer: the function itself allocates device memory, copies inputs to the "
            "device, launches the kernels, copies the outputs back and frees the device memory before it "
            "returns. It must not print, touch files, call exit, or keep state between calls."
        )

    def _task_block(self) -> str:
        return (
            f"Task `{self.task.id}`: {self.task.description}\n"
            f"Entry point: `{self.task.signature}`\n\n"
            f"Contract: {self._contract()}"
        )

    def _current(self, code: str) -> str:
        label = (
            "Current code (the serial C++ reference)"
            if code == self.task.initial_code
            else "Current code (a correct CUDA version)"
        )
        return f"{label}:\n```cuda\n{code.rstrip()}\n```"

    def _example(self, number: int, example: RetrievedExample) -> str:
        clip = self.config.max_example_chars
        speed = f" (speedup x{example.speedup:.2f})" if example.speedup is not None else ""
        return (
            f"### Example {number}: {example.source_technique} -> {example.target_technique}{speed}\n"
            f"Reasoning: {example.think.strip() or '(none recorded)'}\n"
            f"Change: {example.detail.strip() or '(none recorded)'}\n"
            f"Before:\n```cuda\n{_clip(example.code_before, clip).rstrip()}\n```\n"
            f"After:\n```cuda\n{_clip(example.code_after, clip).rstrip()}\n```"
        )

    def _answer_format(self) -> str:
        return (
            "Answer with a short explanation, then the complete new source file in ONE ```cuda code block "
            f"that defines `{self.task.entry}`."
        )

    def fit(
        self, build: Callable[[list[RetrievedExample]], list[ChatMessage]], examples: list[RetrievedExample]
    ) -> PromptMessages:
        """`build(examples)`, with examples dropped from the last (the least similar) until the prompt fits
        the model's context with room for `max_tokens` of answer; models that state no context are not
        trimmed. What was dropped is the prompt's `note` (logged, and recorded on the candidate)."""
        prompt = PromptMessages(build(examples))
        limited = _context_limited(self.model)
        if limited is None:
            return prompt
        budget = limited.prompt_budget(self.config.max_tokens)
        tokens = limited.count_prompt_tokens(prompt)
        kept = list(examples)
        while tokens > budget and kept:
            kept.pop()
            prompt = PromptMessages(build(kept))
            tokens = limited.count_prompt_tokens(prompt)
        dropped = len(examples) - len(kept)
        if tokens > budget:
            prompt.fits = False
            prompt.note = (
                f"the prompt takes {tokens} tokens even without retrieved examples ({dropped} dropped), more "
                f"than the {budget} the model's context leaves with {self.config.max_tokens} for the answer"
            )
        elif dropped:
            prompt.note = (
                f"{dropped} of {len(examples)} retrieved examples left out to fit the model's context "
                f"({tokens} of {budget} prompt tokens)"
            )
        if prompt.note is not None:
            logger.info("task %s: %s", self.task.id, prompt.note)
        return prompt

    # ---- prompts ------------------------------------------------------------------------------

    def step_messages(
        self,
        code: str,
        technique: str,
        examples: list[RetrievedExample],
        *,
        step: int,
        source_technique: str = INITIAL_TECHNIQUE,
    ) -> PromptMessages:
        """The prompt asking to apply `technique` to `code`, guided by examples of that transition."""
        header = format_header({"prompt": "step", "task": self.task.id, "technique": technique, "step": step})

        def build(shown: list[RetrievedExample]) -> list[ChatMessage]:
            parts = [header, self._task_block(), self._current(code)]
            if shown:
                parts.append(
                    f"Examples of applying `{technique}` after `{source_technique}` in other programs:\n\n"
                    + "\n\n".join(self._example(i, ex) for i, ex in enumerate(shown, start=1))
                )
            parts.append(
                f"Apply the optimization technique **{technique}** to the current code, as the examples do. "
                "Keep the results identical. " + self._answer_format()
            )
            return [
                ChatMessage(role="system", content=SYSTEM_PROMPT),
                ChatMessage(role="user", content="\n\n".join(parts)),
            ]

        return self.fit(build, examples)

    def one_shot_messages(
        self, kind: Literal["standard", "cot", "rag"], examples: list[RetrievedExample] | None = None
    ) -> PromptMessages:
        """Baseline prompts: `standard` (one shot), `cot` (think step by step), `rag` (flat examples)."""
        header = format_header({"prompt": kind, "task": self.task.id})
        instruction = (
            "Rewrite the program in CUDA so that it runs as fast as possible on a modern NVIDIA GPU. "
        )
        if kind == "cot":
            instruction += (
                "First think step by step: where the time goes, what parallelism there is, how memory "
                "should be accessed, which optimizations apply. Then write the code. "
            )

        def build(shown: list[RetrievedExample]) -> list[ChatMessage]:
            parts = [header, self._task_block(), self._current(self.task.initial_code)]
            if shown:
                parts.append(
                    "Examples of CUDA optimizations of similar programs:\n\n"
                    + "\n\n".join(self._example(i, ex) for i, ex in enumerate(shown, start=1))
                )
            parts.append(instruction + self._answer_format())
            return [
                ChatMessage(role="system", content=SYSTEM_PROMPT),
                ChatMessage(role="user", content="\n\n".join(parts)),
            ]

        return self.fit(build, list(examples or []) if kind == "rag" else [])

    def rewrite_messages(self, code: str, examples: list[RetrievedExample], *, step: int) -> PromptMessages:
        """The MCTS-RAG step: make `code` faster, shown the examples most similar to it (no technique)."""
        header = format_header({"prompt": "mcts-rag", "step": step, "task": self.task.id})

        def build(shown: list[RetrievedExample]) -> list[ChatMessage]:
            parts = [header, self._task_block(), self._current(code)]
            if shown:
                parts.append(
                    "Examples of CUDA optimizations of similar programs:\n\n"
                    + "\n\n".join(self._example(i, ex) for i, ex in enumerate(shown, start=1))
                )
            parts.append(
                "Make the current code run faster on a modern NVIDIA GPU (if it is serial C++, rewrite it in "
                "CUDA), learning from the examples where they apply. Keep the results identical. "
                + self._answer_format()
            )
            return [
                ChatMessage(role="system", content=SYSTEM_PROMPT),
                ChatMessage(role="user", content="\n\n".join(parts)),
            ]

        return self.fit(build, examples)

    # ---- calling the model --------------------------------------------------------------------

    async def propose(self, messages: list[ChatMessage], *, seed: int | None) -> StepProposal:
        """Call the model and turn its answer into a `StepProposal`.

        A replay miss is a failed proposal (the recorded teacher never took that step), and so is a
        prompt longer than the model's context (`PromptMessages.fits`, or the backend's own refusal),
        which is never sent; every other model error propagates, because a broken model server should
        stop the search.
        """
        note = messages.note if isinstance(messages, PromptMessages) else None
        if isinstance(messages, PromptMessages) and not messages.fits:
            return StepProposal(failure=note, failure_kind="prompt_too_long", prompt_note=note)
        began = time.perf_counter()
        try:
            completion: Completion = await self.model.complete(
                messages, max_tokens=self.config.max_tokens, temperature=self.config.temperature, seed=seed
            )
        except ReplayMissError as e:
            logger.info("replay miss: %s", e)
            return StepProposal(
                failure=str(e), failure_kind="replay_miss", backend="replay", prompt_note=note
            )
        except PromptTooLongError as e:
            logger.info("task %s: %s", self.task.id, e)
            return StepProposal(failure=str(e), failure_kind="prompt_too_long", prompt_note=note)
        seconds = completion.generation_s
        spent: dict[str, Any] = {
            "answer": completion.text,
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "model": completion.model,
            "backend": completion.backend,
            "prompt_note": note,
            "generation_s": round(time.perf_counter() - began, 4) if seconds is None else seconds,
        }
        try:
            code = extract_code(completion.text, self.task.entry, self.task.kind)
        except CodeExtractionError as e:
            return StepProposal(**spent, failure=str(e), failure_kind="no_code")
        if not entry_point_preserved(code, self.task.entry, self.task.kind):
            what = "__global__ kernel" if self.task.kind == "kernel" else 'extern "C" function'
            failure = f"the answer does not define the {what} `{self.task.entry}`"
            return StepProposal(**spent, failure=failure, failure_kind="entry_point_lost")
        return StepProposal(**spent, code=code)
