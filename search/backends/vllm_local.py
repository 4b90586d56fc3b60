"""In-process generation with vLLM (optional: `vllm` is imported only when this backend is built)."""

from __future__ import annotations

import asyncio
import importlib
import logging
from typing import Any

from search.backends.base import ChatMessage, Completion, ModelResponseError, ModelUnavailableError

logger = logging.getLogger(__name__)


def _import_vllm() -> Any:
    try:
        return importlib.import_module("vllm")
    except ImportError as e:
        raise ModelUnavailableError(
            "the 'vllm' backend needs the vllm package (pip install vllm on a GPU host); "
            "use backend 'openai' against a vLLM server or 'replay' instead"
        ) from e


class VLLMInProcessModel:
    """Wraps ``vllm.LLM``; calls run in a worker thread because vLLM's offline API blocks."""

    def __init__(self, model: str, **engine_args: Any) -> None:
        """Load `model` with vLLM; `engine_args` go to ``vllm.LLM`` (e.g. gpu_memory_utilization)."""
        self._vllm = _import_vllm()
        self.model = model
        self._llm = self._vllm.LLM(model=model, **engine_args)
        # vLLM's engine is not safe to drive from several threads at once.
        self._lock = asyncio.Lock()

    async def complete(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """Generate one chat answer with the model's chat template."""
        params: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed}
        if json_schema is not None:
            guided = importlib.import_module("vllm.sampling_params").GuidedDecodingParams
            params["guided_decoding"] = guided(json=json_schema)
        sampling = self._vllm.SamplingParams(**params)
        conversation = [m.model_dump() for m in messages]
        async with self._lock:
            outputs = await asyncio.to_thread(self._llm.chat, conversation, sampling, use_tqdm=False)
        try:
            request = outputs[0]
            generated = request.outputs[0]
        except (IndexError, AttributeError) as e:
            raise ModelResponseError("vLLM returned no output") from e
        return Completion(
            text=generated.text,
            prompt_tokens=len(request.prompt_token_ids or []),
            completion_tokens=len(generated.token_ids),
            model=self.model,
            backend="vllm",
            finish_reason=generated.finish_reason,
        )

    async def aclose(self) -> None:
        """Drop the engine reference (vLLM frees GPU memory when it is garbage collected)."""
        del self._llm
