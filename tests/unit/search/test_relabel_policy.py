"""The relabel decision rule on real embeddings: alias and taxonomy hits, the scorer, flags."""

from __future__ import annotations

from graphdb.models import Technique, utc_now
from search.embeddings import Embedder
from search.relabel.relabeler import RelabelPolicy, StepInput, technique_candidates
from search.relabel.scoring import load_model
from search.relabel.taxonomy import Taxonomy
from tests.unit.search.test_evidence import MERGE_BRANCHY, MERGE_SELECT

SHUFFLE_BEFORE = """
__global__ void sum_k(const float* x, float* out) {
    __shared__ float p[256];
    p[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(out, p[0]);
}
"""
SHUFFLE_AFTER = """
__global__ void sum_k(const float* x, float* out) {
    float v = x[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}
"""


def _graph(taxonomy: Taxonomy, names: list[str], *, aliases: bool = True) -> list[Technique]:
    now = utc_now()
    return [
        Technique(
            name=t.name,
            description=t.description,
            aliases=list(t.aliases) if aliases else [],
            created_at=now,
        )
        for t in taxonomy.techniques
        if t.name in names
    ]


GRAPH = ["Parallelization", "Shared memory tiling", "Warp-level shuffle reduction", "Loop unrolling"]


def test_graph_techniques_link_to_the_taxonomy_and_missing_ones_are_candidates(taxonomy: Taxonomy) -> None:
    candidates = technique_candidates(_graph(taxonomy, GRAPH, aliases=False), taxonomy)
    by_name = {c.name: c for c in candidates}
    assert by_name["Loop unrolling"].in_graph and "#pragma unroll" in by_name["Loop unrolling"].labels
    assert not by_name["Register tiling"].in_graph
    assert len(candidates) == len(taxonomy.techniques)


def test_alias_and_taxonomy_hits_decide_without_the_scorer(policy: RelabelPolicy, taxonomy: Taxonomy) -> None:
    index = policy.index(_graph(taxonomy, GRAPH))
    merged = policy.choose(StepInput("Apply loop-unrolling"), index)
    assert (merged.outcome, merged.technique, merged.decided_by) == ("merge", "Loop unrolling", "alias")
    created = policy.choose(StepInput("register blocking"), index)
    assert (created.outcome, created.technique, created.decided_by) == ("new", "Register tiling", "taxonomy")
    assert created.canonical is not None and created.canonical.description


def test_the_scorer_merges_a_paraphrase_and_keeps_an_unknown_technique_apart(
    policy: RelabelPolicy, taxonomy: Taxonomy
) -> None:
    index = policy.index(_graph(taxonomy, GRAPH))
    paraphrase = policy.choose(
        StepInput(
            "Reduce the partial sums inside each warp with shuffle-down",
            "lanes combine values register to register with __shfl_down_sync",
            code_before=SHUFFLE_BEFORE,
            code_after=SHUFFLE_AFTER,
        ),
        index,
    )
    assert paraphrase.decided_by == "model"
    assert (paraphrase.outcome, paraphrase.technique) == ("merge", "Warp-level shuffle reduction")
    assert (
        paraphrase.ranked is not None and paraphrase.ranked.summary()[0]["technique"] == paraphrase.technique
    )
    outside = policy.choose(
        StepInput("Kahan compensated summation", "a running compensation term keeps the lost low bits"), index
    )
    assert outside.outcome != "merge"


def test_without_a_taxonomy_the_scorer_merges_only_names_the_technique_explains(
    embedder: Embedder, taxonomy: Taxonomy
) -> None:
    # A bare graph (names and descriptions, no aliases, no taxonomy): the committed model for it merges
    # by score, but only a name every word of which the technique's own words explain.
    bare = RelabelPolicy(embedder, taxonomy=None, model=load_model())
    assert bare.model.merge_gate == "explained"
    index = bare.index(_graph(taxonomy, GRAPH, aliases=False))
    merged = bare.choose(StepInput("Warp shuffle reduction", "sum the lanes with shuffles"), index)
    assert (merged.decided_by, merged.outcome, merged.technique) == (
        "model",
        "merge",
        "Warp-level shuffle reduction",
    )
    # A scan is not a reduction, though it shares most of the words: "prefix" and "scan" are in no
    # description of this graph.
    scan = bare.choose(StepInput("Warp shuffle prefix scan", "inclusive scan across the lanes"), index)
    assert scan.outcome != "merge"


def test_a_name_the_code_contradicts_is_flagged(policy: RelabelPolicy, taxonomy: Taxonomy) -> None:
    index = policy.index(_graph(taxonomy, GRAPH))
    choice = policy.choose(
        StepInput("Read-only loads via __ldg", code_before=SHUFFLE_BEFORE, code_after=SHUFFLE_AFTER), index
    )
    assert any(f.startswith("name_code_mismatch") and "__ldg" in f for f in choice.flags)
    unparsed = policy.choose(
        StepInput("Loop unrolling", code_before=SHUFFLE_BEFORE, code_after="{{{{ ]]]] not code " * 30), index
    )
    assert any(f.startswith("code_unparsed") for f in unparsed.flags)


def test_sessions_read_the_graph_once_and_reuse_its_candidate_index(
    embedder: Embedder, taxonomy: Taxonomy
) -> None:
    from dataclasses import dataclass

    from bench.probes.relabel_convergence import TechniqueCatalogue
    from search.relabel.relabeler import Relabeler

    catalogue = TechniqueCatalogue(_graph(taxonomy, GRAPH))
    relabeler = Relabeler(catalogue, embedder, taxonomy=taxonomy)

    @dataclass
    class Step:
        method: str
        detail: str = ""
        think: str = ""

    session = relabeler.session()
    exact = Step("loop UNROLLING", "a detail only this test writes: exact 7d1f")
    fresh = Step("Spin the loop out by hand", "a detail only this test writes: fresh 7d1f")
    session.prepare([exact, fresh])
    # An exact name needs no embedding; a name to decide has its "name: detail" embedded in the batch.
    assert StepInput(exact.method, exact.detail).text.embedded_text() not in relabeler.policy.vectors._cache
    assert StepInput(fresh.method, fresh.detail).text.embedded_text() in relabeler.policy.vectors._cache
    assert session.resolve(exact.method, exact.detail) == "Loop unrolling"
    assert not session.decisions
    session.resolve(fresh.method, fresh.detail)
    assert len(session.decisions) == 1
    first = relabeler._cached_index
    # An unchanged graph: the next session reuses the index; a changed one gets a new index.
    relabeler.session().resolve("Spin the loop out by hand, again", "")
    assert relabeler._cached_index is first
    catalogue.apply(session.new_techniques, [(a.technique, a.alias) for a in session.aliases])
    relabeler.session().resolve("Spin the loop out by hand, once more", "")
    assert relabeler._cached_index is not first


def test_branches_turned_into_selects_tell_branch_elimination_from_divergence_reduction(
    policy: RelabelPolicy, taxonomy: Taxonomy
) -> None:
    # The think speaks of divergence (what warp divergence reduction mentions); the code shows the
    # branches becoming selects, which only branch elimination shows.
    index = policy.index(_graph(taxonomy, [*GRAPH, "Branch elimination", "Warp divergence reduction"]))
    step = StepInput(
        "Branchless rewrite",
        "both candidates are read at clamped indices, take_a selects the value and the fingers advance by it",
        think="the ternary with post-increments compiles to divergent branches that serialise the warp",
        code_before=MERGE_BRANCHY,
        code_after=MERGE_SELECT,
    )
    choice = policy.choose(step, index)
    assert choice.evidence is not None and "branches_to_selects" in choice.evidence.introduced
    assert (choice.decided_by, choice.outcome, choice.technique) == ("model", "merge", "Branch elimination")
