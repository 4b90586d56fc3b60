"""MCTS-RAG: Monte Carlo Tree Search over the model's own rewrites, with flat retrieval at every step.

The paper's strongest comparison without the reasoning graph. It names the baseline but not its
settings, so this is our reading, kept as close to MCGS as the difference allows, so that the two
compare the *knowledge* (graph transitions vs similar code) and not the search:

* a state is a piece of code (the root: the serial reference); an action is "ask the model to make
  this code faster, shown the `rag_examples` examples whose code is most similar to it"
  (`KnowledgeSource.similar_examples`, the flat-RAG baseline's retrieval, repeated at every step);
* **selection**: unvisited children first (best own reward), else UCT ``Q + c*sqrt(ln N(parent) / n)``
  with c = sqrt(2) (`search.mcgs.select_child`, prior 1);
* **expansion**: `branching` rewrites of the leaf's code, sampled with different seeds, each evaluated;
* **rollout** from the chosen child: one rewrite at a time, each evaluated, until a step fails,
  `max_rollout_depth` or `max_path_length`;
* **reward and back-up** as MCGS: the hierarchical reward, the maximum of the rollout backed up;
  `rollouts` iterations within the same evaluation and token budgets. Iterations run one at a time.

Candidates have no technique; their path is the initial node followed by one ``"rewrite"`` per step.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from search.engine import Candidate, SearchConfig, SearchResult, SearchSession, StepJob, ask_knowledge
from search.mcgs import SearchState, backed_up_value, backup, mark_exhausted, select_child
from search.protocols import INITIAL_TECHNIQUE, KnowledgeSource, RetrievedExample

REWRITE = "rewrite"
"""The path label of one MCTS-RAG step (there is no technique)."""


class MCTSRAGConfig(SearchConfig):
    """MCTS-RAG settings (plus the common ones; `rag_examples` examples are shown per step). All ours."""

    rollouts: int = Field(default=10, ge=1, description="iterations: select, expand, roll out, back up")
    branching: int = Field(default=3, ge=1, description="rewrites sampled when a state is expanded")
    exploration: float = Field(default=math.sqrt(2), ge=0.0, description="c in Q + c*sqrt(ln N / n)")
    max_rollout_depth: int = Field(default=3, ge=0, description="steps per rollout")
    backprop: Literal["max", "last"] = Field(default="max", description="value backed up from a rollout")


class MCTSRAGSearch:
    """One MCTS-RAG run for one task; create a new instance per run."""

    def __init__(self, session: SearchSession, knowledge: KnowledgeSource, config: MCTSRAGConfig) -> None:
        """Bind the search to a session and a knowledge source (only its flat retrieval is used)."""
        self.session = session
        self.knowledge = knowledge
        self.config = config
        self.root = SearchState(INITIAL_TECHNIQUE, session.task.initial_code, [INITIAL_TECHNIQUE])
        self._examples: dict[str, list[RetrievedExample]] = {}

    async def _similar(self, code: str) -> list[RetrievedExample]:
        if code not in self._examples:
            k = self.config.rag_examples
            found = await ask_knowledge(self.knowledge, self.config, self.knowledge.similar_examples, code, k)
            self._examples[code] = found
        return self._examples[code]

    async def _rewrites(
        self,
        state_path: list[str],
        code: str,
        parent_index: int | None,
        count: int,
        phase: Literal["expansion", "rollout"],
    ) -> list[Candidate]:
        examples = await self._similar(code)
        path = [*state_path, REWRITE]
        messages = self.session.policy.rewrite_messages(code, examples, step=len(path) - 1)
        # The session gives every candidate its own sampling seed, so the `count` rewrites differ.
        jobs = [
            StepJob(
                messages=messages, phase=phase, path=list(path), technique=None, parent_index=parent_index
            )
            for _ in range(count)
        ]
        return await self.session.run_batch(jobs)

    def _select(self) -> SearchState:
        node = self.root
        while node.children is not None:
            open_children = [ch for ch in node.children if ch.viable and not ch.exhausted]
            if not open_children:
                break
            node = select_child(node, open_children, self.config.exploration)
        return node

    async def _iteration(self) -> None:
        config, session = self.config, self.session
        leaf = self._select()
        if leaf.children is not None or leaf.steps >= config.max_path_length:
            mark_exhausted(leaf)  # nothing left below it
            backup(leaf, leaf.reward)
            return
        batch = await self._rewrites(
            leaf.path, leaf.code, leaf.candidate_index, config.branching, "expansion"
        )
        leaf.children = [SearchState.child(leaf, REWRITE, c, order) for order, c in enumerate(batch)]
        open_children = [ch for ch in leaf.children if ch.viable]
        if not open_children:
            mark_exhausted(leaf)
            backup(
                leaf, backed_up_value([leaf.reward, *(ch.reward for ch in leaf.children)], config.backprop)
            )
            return
        start = select_child(leaf, open_children, config.exploration)
        rewards = [start.reward]
        code, path, parent_index = start.code, list(start.path), start.candidate_index
        for _ in range(config.max_rollout_depth):
            if session.out_of_budget() is not None or len(path) - 1 >= config.max_path_length:
                break
            step = await self._rewrites(path, code, parent_index, 1, "rollout")
            if not step:
                break  # a budget ran out
            rewards.append(step[0].reward)
            if not step[0].passed or step[0].code is None:
                break  # a failed step ends the rollout
            code, path, parent_index = step[0].code, step[0].path, step[0].index
        backup(start, backed_up_value(rewards, config.backprop))

    async def run(self) -> SearchResult:
        """Search until the rollouts, a budget or the tree is exhausted; return the best verified code."""
        session = self.session
        await session.emit("started")
        for _ in range(self.config.rollouts):
            if session.out_of_budget() is not None or self.root.exhausted:
                break
            await self._iteration()
            session.iterations += 1
            await session.emit("iteration", iteration=session.iterations)
        stop = session.out_of_budget() or ("exhausted" if self.root.exhausted else "completed")
        return await session.finish(stop)
