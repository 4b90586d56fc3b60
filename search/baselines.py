"""Every optimization method behind one entry point, `optimize`.

* ``standard``: one-shot prompt, one candidate.
* ``cot``: one-shot chain-of-thought prompt, one candidate.
* ``rag``: one-shot prompt with the examples most similar to the code (flat RAG, no graph).
* ``regraph``: graph-guided walk without search (ReGraphT without MCGS): from the initial node, sample
  a successor uniformly at random and apply it; if the step fails, sample again, up to `attempts`
  tries for that step; stop at a dead end, the path-length limit, or when a step's tries all fail.
* ``mcts-rag``: Monte Carlo Tree Search over the model's own rewrites with flat retrieval at every
  step, no graph (`search.mcts_rag`): the paper's strongest baseline without the reasoning graph.
* ``regraph-mcgs``: Monte Carlo Graph Search (`search.mcgs`).
"""

from __future__ import annotations

import random
from typing import Literal, get_args

from search.backends.base import ChatModel
from search.engine import (
    ProgressCallback,
    SearchConfig,
    SearchResult,
    SearchSession,
    StepJob,
    StopReason,
    ask_knowledge,
)
from search.errors import SearchConfigError
from search.mcgs import MCGSConfig, MonteCarloGraphSearch
from search.mcts_rag import MCTSRAGConfig, MCTSRAGSearch
from search.policy import StepPolicy, TaskContext
from search.protocols import INITIAL_TECHNIQUE, CandidateEvaluator, KnowledgeSource

Method = Literal["standard", "cot", "rag", "mcts-rag", "regraph", "regraph-mcgs"]
METHODS: tuple[str, ...] = get_args(Method)


def config_class(method: str) -> type[SearchConfig]:
    """The settings class of `method`: its own for the searches, `SearchConfig` for the others."""
    own: dict[str, type[SearchConfig]] = {"regraph-mcgs": MCGSConfig, "mcts-rag": MCTSRAGConfig}
    return own.get(method, SearchConfig)


async def _one_shot(
    session: SearchSession, kind: Literal["standard", "cot", "rag"], knowledge: KnowledgeSource
) -> SearchResult:
    await session.emit("started")
    examples = None
    if kind == "rag":
        code, k = session.task.initial_code, session.config.rag_examples
        examples = await ask_knowledge(knowledge, session.config, knowledge.similar_examples, code, k)
    messages = session.policy.one_shot_messages(kind, examples)
    job = StepJob(
        messages=messages, phase="one-shot", path=[INITIAL_TECHNIQUE], technique=None, parent_index=None
    )
    await session.run_batch([job])
    session.iterations = 1
    return await session.finish(session.out_of_budget() or "completed")


async def _regraph_walk(session: SearchSession, knowledge: KnowledgeSource) -> SearchResult:
    await session.emit("started")
    config = session.config
    rng = random.Random(config.seed)
    technique, code, path = INITIAL_TECHNIQUE, session.task.initial_code, [INITIAL_TECHNIQUE]
    parent_index: int | None = None
    stop: StopReason = "completed"
    while len(path) - 1 < config.max_path_length:
        k = config.examples_per_step
        options = await ask_knowledge(knowledge, config, knowledge.successors, technique, code, k)
        if not options:
            stop = "exhausted"
            break
        advanced = False
        for _ in range(config.attempts):
            if (spent := session.out_of_budget()) is not None:
                return await session.finish(spent)
            option = options[rng.randrange(len(options))]
            messages = session.policy.step_messages(
                code, option.technique, option.examples, step=len(path), source_technique=technique
            )
            step_path = [*path, option.technique]
            job = StepJob(
                messages=messages,
                phase="attempt",
                path=step_path,
                technique=option.technique,
                parent_index=parent_index,
            )
            batch = await session.run_batch([job])
            if not batch:
                continue
            candidate = batch[0]
            if candidate.passed and candidate.code is not None:
                technique, code, path, parent_index = (
                    option.technique,
                    candidate.code,
                    step_path,
                    candidate.index,
                )
                advanced = True
                break
        session.iterations += 1
        await session.emit("iteration", iteration=session.iterations)
        if not advanced:
            stop = session.out_of_budget() or "exhausted"
            break
    return await session.finish(stop)


async def optimize(
    method: str,
    task_context: TaskContext,
    knowledge: KnowledgeSource,
    model: ChatModel,
    evaluator: CandidateEvaluator,
    config: SearchConfig | None = None,
    on_event: ProgressCallback | None = None,
) -> SearchResult:
    """Optimize one task with `method` (one of `METHODS`) and return the best verified code found.

    `config` may be a `SearchConfig` or the method's own settings (`config_class`); a plain
    `SearchConfig` is widened with that method's defaults. `on_event` receives progress events in order.
    """
    if method not in METHODS:
        raise SearchConfigError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    cls = config_class(method)
    config = config or cls()
    if not isinstance(config, cls):
        config = cls.model_validate(config.model_dump())
    policy = StepPolicy(model, task_context, config.policy)
    session = SearchSession(method, task_context, policy, evaluator, config, on_event)
    if method in ("standard", "cot", "rag"):
        return await _one_shot(session, method, knowledge)  # type: ignore[arg-type]
    if method == "regraph":
        return await _regraph_walk(session, knowledge)
    if isinstance(config, MCTSRAGConfig):
        return await MCTSRAGSearch(session, knowledge, config).run()
    assert isinstance(config, MCGSConfig)
    return await MonteCarloGraphSearch(session, knowledge, config).run()
