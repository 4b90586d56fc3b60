"""Every Cypher statement of the graph store: named constants and small builders.

Values always travel as `$parameters`. The few pieces of text that are built (map projections) come
from the property allowlists below, never from a caller.
"""

from __future__ import annotations

TECHNIQUE_PROPERTIES = ("name", "description", "aliases", "embedding", "created_at", "created_by")
EXAMPLE_PROPERTIES = (
    "id",
    "source",
    "target",
    "task_id",
    "think",
    "detail",
    "code_before",
    "code_after",
    "code_embedding",
    "source_label",
    "target_label",
    "speedup",
    "speedup_over_serial",
    "verdict",
    "device",
    "model",
    "review_status",
    "review_reason",
    "held",
    "trajectory_id",
    "step_index",
    "created_at",
)
TRANSITION_STAT_PROPERTIES = (
    "n_examples",
    "n_verified",
    "n_rejected",
    "success_rate",
    "mean_speedup",
    "median_speedup",
)
# What readers see of a transition (its retrieval candidates stay in the database).
TRANSITION_PROPERTIES = ("key", *TRANSITION_STAT_PROPERTIES)


def projection(variable: str, properties: tuple[str, ...], *, without: tuple[str, ...] = ()) -> str:
    """A map projection `v {.a, .b}` over allowlisted properties (retrieval leaves out the embeddings)."""
    if not variable.isidentifier():
        raise ValueError(f"not a Cypher variable: {variable!r}")
    chosen = [p for p in properties if p not in without]
    return variable + " {" + ", ".join(f".{p}" for p in chosen) + "}"


EXAMPLE_LIGHT = projection("e", EXAMPLE_PROPERTIES, without=("code_embedding",))


def retrieved_projection(score: str | None) -> str:
    """An example as retrieval returns it, without embedding; `similarity` = the variable `score` if any.

    `created_at` travels as epoch seconds and microseconds (`created_at_s`, `created_at_us`): the
    driver's conversion of Neo4j datetimes was the larger part of the retrieval call's time.
    """
    if score is not None and not score.isidentifier():
        raise ValueError(f"not a Cypher variable: {score!r}")
    light = projection("e", EXAMPLE_PROPERTIES, without=("code_embedding", "created_at"))
    similarity = f"similarity: {score}, " if score is not None else ""
    return light.replace(
        "e {",
        f"e {{{similarity}created_at_s: e.created_at.epochSeconds, created_at_us: e.created_at.microsecond, ",
        1,
    )


EXAMPLE_FULL = projection("e", EXAMPLE_PROPERTIES)
TECHNIQUE_FULL = projection("t", TECHNIQUE_PROPERTIES)
TECHNIQUE_LIGHT = projection("t", TECHNIQUE_PROPERTIES, without=("embedding",))
TRANSITION_PUBLIC = projection("r", TRANSITION_PROPERTIES)

# --- techniques -------------------------------------------------------------------------------------

GET_TECHNIQUE = f"MATCH (t:Technique {{name: $name}}) RETURN {TECHNIQUE_FULL} AS t"

FIND_TECHNIQUE_BY_LABEL = f"""
MATCH (t:Technique)
WHERE toLower(t.name) = toLower($label) OR any(a IN coalesce(t.aliases, []) WHERE toLower(a) = toLower($label))
RETURN {TECHNIQUE_FULL} AS t
ORDER BY CASE WHEN toLower(t.name) = toLower($label) THEN 0 ELSE 1 END, t.name
LIMIT 1
"""

LIST_TECHNIQUES = f"""
MATCH (t:Technique)
RETURN {TECHNIQUE_LIGHT} AS t
ORDER BY t.name SKIP $offset LIMIT $limit
"""

TECHNIQUE_NAMES = "MATCH (t:Technique) RETURN t.name AS name ORDER BY name"

EXISTING_TECHNIQUE_NAMES = "MATCH (t:Technique) WHERE t.name IN $names RETURN t.name AS name"

CREATE_TECHNIQUES = "UNWIND $rows AS row CREATE (t:Technique) SET t = row"

ADD_ALIAS = """
MATCH (t:Technique {name: $technique})
SET t.aliases = CASE WHEN $alias IN coalesce(t.aliases, []) OR $alias = t.name
                     THEN coalesce(t.aliases, []) ELSE coalesce(t.aliases, []) + $alias END
RETURN t.name AS name
"""

REMOVE_ALIAS = """
MATCH (t:Technique {name: $technique})
SET t.aliases = [a IN coalesce(t.aliases, []) WHERE a <> $alias]
RETURN t.name AS name
"""

SET_TECHNIQUE_DESCRIPTION = """
MATCH (t:Technique {name: $name})
SET t.description = $description, t.embedding = $embedding
RETURN t.name AS name
"""

RENAME_TECHNIQUE = """
MATCH (t:Technique {name: $old})
SET t.name = $new,
    t.aliases = [a IN coalesce(t.aliases, []) WHERE a <> $new] + $old,
    t.embedding = coalesce($embedding, t.embedding)
RETURN t.name AS name
"""

DELETE_TECHNIQUE = "MATCH (t:Technique {name: $name}) DETACH DELETE t"

# The index is approximate (HNSW): asked for 1 it can miss the exact match (seen in CI: a technique's own
# embedding found another technique first). It is asked for $candidates (k + 64) and the best k kept.
NEAREST_TECHNIQUES = f"""
CALL db.index.vector.queryNodes('technique_embedding', $candidates, $embedding) YIELD node AS t, score
RETURN {TECHNIQUE_FULL} AS t, score
ORDER BY score DESC, t.name
LIMIT $k
"""

FULLTEXT_TECHNIQUES = f"""
CALL db.index.fulltext.queryNodes('technique_text', $query, {{limit: $k}}) YIELD node AS t, score
RETURN {TECHNIQUE_LIGHT} AS t, score
ORDER BY score DESC, t.name
"""

# Every transition touching a technique, with both ends' names (for renames and merges).
TRANSITIONS_OF_TECHNIQUE = """
MATCH (s:Technique)-[r:TRANSITION]->(t:Technique)
WHERE s.name = $name OR t.name = $name
RETURN r.key AS key, s.name AS source, t.name AS target
"""

# --- transitions ------------------------------------------------------------------------------------

EXISTING_TRANSITION_KEYS = "MATCH ()-[r:TRANSITION]->() WHERE r.key IN $keys RETURN r.key AS key"

ENSURE_TRANSITIONS = """
UNWIND $rows AS row
MATCH (s:Technique {name: row.source}), (t:Technique {name: row.target})
MERGE (s)-[r:TRANSITION {key: row.key}]->(t)
ON CREATE SET r.created_at = $at, r.n_examples = 0, r.n_verified = 0, r.n_rejected = 0,
              r.verified_speedups = [], r.candidate_ids = [], r.candidates_rev = randomUUID()
RETURN count(r) AS n
"""

# Each transition carries three hidden properties besides its statistics, so that both retrieval and
# ingestion cost a bounded amount of work whatever the transition's size:
# - `r.candidate_ids`: its retrieval candidates, none rejected: all of its live examples when at most
#   $candidates of them, else the $candidates/2 best verified speedups and the $candidates/2 most
#   recent examples, interleaved so that any prefix mixes both. Retrieval ranks a prefix by similarity.
# - `r.verified_speedups`: the speedups of its verified examples (not rejected, passed, measured),
#   from which the statistics are computed.
# - `r.candidates_rev`: a random revision, new on every write that may change what retrieval returns
#   about the candidates (the statements that set `r.candidate_ids`, and renames, which change the
#   examples' ends), so a process may cache what it read under it (graphdb/retrieval_cache.py).
# Adding examples then only needs the old candidates plus the new ones (the new best and most recent
# are among them) and the old speedups plus the new ones; curation falls back to a full recompute.


def _pool_ranking(pool: str) -> str:
    """Cypher computing `best` and `recent` (ids, $candidates each) over the examples `pool` matches."""
    return f"""
CALL (r, row) {{
  {pool}
  WITH e ORDER BY CASE WHEN e.verdict = 'passed' THEN coalesce(e.speedup, -1.0) ELSE -1.0 END DESC, e.id
  LIMIT $candidates
  RETURN collect(e.id) AS best
}}
CALL (r, row) {{
  {pool}
  WITH e ORDER BY e.created_at DESC, e.id DESC
  LIMIT $candidates
  RETURN collect(e.id) AS recent
}}"""


_CANDIDATE_IDS = """reduce(acc = [], i IN range(0, CASE WHEN live <= $candidates THEN $candidates ELSE $candidates / 2 END - 1) |
         reduce(a = acc, x IN [best[i], recent[i]] | CASE WHEN x IS NULL OR x IN a THEN a ELSE a + x END))"""

_SET_STATS_AND_CANDIDATES = f"""
CALL (speedups) {{
  UNWIND speedups AS x
  RETURN count(x) AS n_verified, avg(x) AS mean_speedup, percentileCont(x, 0.5) AS median_speedup,
         sum(CASE WHEN x > 1.0 THEN 1 ELSE 0 END) AS n_faster
}}
SET r.n_examples = live, r.n_rejected = n_rejected, r.n_verified = n_verified,
    r.mean_speedup = mean_speedup,
    r.median_speedup = CASE WHEN n_verified > 0 THEN median_speedup ELSE null END,
    r.success_rate = CASE WHEN n_verified > 0 THEN toFloat(n_faster) / n_verified ELSE null END,
    r.verified_speedups = speedups,
    r.candidate_ids = {_CANDIDATE_IDS},
    r.candidates_rev = randomUUID()"""

_FULL_SCAN = (
    """
UNWIND $keys AS key
MATCH ()-[r:TRANSITION {key: key}]->()
WITH r, key AS row
CALL (r) {
  OPTIONAL MATCH (e:Example {transition_key: r.key})
  RETURN count(e) AS total,
         sum(CASE WHEN e.review_status = 'rejected' THEN 1 ELSE 0 END) AS n_rejected,
         sum(CASE WHEN e.review_status <> 'rejected' AND coalesce(e.held, false) THEN 1 ELSE 0 END) AS n_held
}
CALL (r) {
  OPTIONAL MATCH (e:Example {transition_key: r.key})
  WHERE e.review_status <> 'rejected' AND NOT coalesce(e.held, false) AND e.verdict = 'passed' AND e.speedup IS NOT NULL
  RETURN collect(e.speedup) AS speedups
}"""
    + _pool_ranking(
        "MATCH (e:Example {transition_key: r.key}) WHERE e.review_status <> 'rejected' AND NOT coalesce(e.held, false)"
    )
    + """
WITH r, total, n_rejected, speedups, best, recent, total - n_rejected - n_held AS live"""
)

# Statistics and candidates recomputed from all of the transitions' examples (after curation: they
# cannot drift whatever operation ran); a transition left without any example goes away.
RECOMPUTE_TRANSITION_STATS = (
    _FULL_SCAN
    + _SET_STATS_AND_CANDIDATES
    + """
WITH r, total WHERE total = 0
DELETE r
"""
)

# After an import, which writes the exported statistics as they are: only the hidden properties.
SET_CANDIDATE_IDS = (
    _FULL_SCAN
    + f"""
SET r.verified_speedups = speedups, r.candidate_ids = {_CANDIDATE_IDS}, r.candidates_rev = randomUUID()
"""
)

# Ingestion of new examples. Rows: key, live (new examples not rejected, not held), rejected, speedups (of the
# new verified ones), new (the new live ones as {id, score, at}: the ranking keys of `_pool_ranking`,
# known to the caller, so only the old candidates are read, once). Needs both hidden properties on
# every transition (`TRANSITIONS_WITHOUT_UPKEEP` finds those that lack them, for a full recompute).
ADD_TO_TRANSITION_STATS = (
    """
UNWIND $rows AS row
MATCH ()-[r:TRANSITION {key: row.key}]->()
WITH r, row, r.n_examples + row.live AS live, r.n_rejected + row.rejected AS n_rejected,
     r.verified_speedups + row.speedups AS speedups
CALL (r, row) {
  UNWIND r.candidate_ids AS id
  MATCH (e:Example {id: id})
  WITH collect({id: e.id, at: e.created_at,
                score: CASE WHEN e.verdict = 'passed' THEN coalesce(e.speedup, -1.0) ELSE -1.0 END}) AS old
  WITH old + row.new AS pool
  CALL (pool) {
    UNWIND pool AS p
    WITH p ORDER BY p.score DESC, p.id
    LIMIT $candidates
    RETURN collect(p.id) AS best
  }
  CALL (pool) {
    UNWIND pool AS p
    WITH p ORDER BY p.at DESC, p.id DESC
    LIMIT $candidates
    RETURN collect(p.id) AS recent
  }
  RETURN best, recent
}"""
    + _SET_STATS_AND_CANDIDATES
    + "\n"
)

TRANSITIONS_WITHOUT_UPKEEP = """
MATCH ()-[r:TRANSITION]->()
WHERE r.key IN $keys AND (r.verified_speedups IS NULL OR r.candidate_ids IS NULL OR r.n_rejected IS NULL)
RETURN r.key AS key
"""

GET_TRANSITION = f"""
MATCH (s:Technique {{name: $source}})-[r:TRANSITION]->(t:Technique {{name: $target}})
RETURN {TRANSITION_PUBLIC} AS r, s.name AS source, t.name AS target
"""

# The speedups of a transition's verified examples (not rejected, not held, passed, measured), as its
# statistics keep them: what a new example's speedup is compared with before it enters unheld (issue 33).
TRANSITION_VERIFIED_SPEEDUPS = """
MATCH (:Technique {name: $source})-[r:TRANSITION]->(:Technique {name: $target})
RETURN coalesce(r.verified_speedups, []) AS speedups
"""

LIST_TRANSITIONS = f"""
MATCH (s:Technique)-[r:TRANSITION]->(t:Technique)
RETURN {TRANSITION_PUBLIC} AS r, s.name AS source, t.name AS target
ORDER BY s.name, t.name SKIP $offset LIMIT $limit
"""

# The transitions into and out of one technique (a technique page): one hop from the technique, not a
# scan of every transition.
TRANSITIONS_INTO_AND_OUT_OF = f"""
MATCH (n:Technique {{name: $name}})
CALL {{
  WITH n
  MATCH (s:Technique)-[r:TRANSITION]->(n)
  RETURN r, s.name AS source, n.name AS target
  UNION
  WITH n
  MATCH (n)-[r:TRANSITION]->(t:Technique)
  RETURN r, n.name AS source, t.name AS target
}}
RETURN {TRANSITION_PUBLIC} AS r, source, target
ORDER BY source, target
"""

# The graph view's edges: the busiest transitions first (ties by source then target name).
BUSIEST_TRANSITIONS = f"""
MATCH (s:Technique)-[r:TRANSITION]->(t:Technique)
RETURN {TRANSITION_PUBLIC} AS r, s.name AS source, t.name AS target
ORDER BY r.n_examples DESC, source, target LIMIT $limit
"""

# Per technique: transitions out of it, into it, and the examples of those into it (a techniques list),
# counted in the database instead of reading every transition.
TECHNIQUE_LINK_COUNTS = """
MATCH (t:Technique)
CALL {
  WITH t
  OPTIONAL MATCH (t)-[o:TRANSITION]->(:Technique)
  RETURN count(o) AS out_n
}
CALL {
  WITH t
  OPTIONAL MATCH (:Technique)-[i:TRANSITION]->(t)
  RETURN count(i) AS in_n, coalesce(sum(i.n_examples), 0) AS examples_in
}
RETURN t.name AS name, out_n, in_n, examples_in
"""

# A technique page's best examples: verified (passed, with a speedup, not rejected) examples of the
# transitions into it, the fastest first; found through the transition_key index.
BEST_EXAMPLES_INTO = f"""
MATCH (:Technique)-[r:TRANSITION]->(:Technique {{name: $name}})
WITH collect(r.key) AS keys
MATCH (e:Example) WHERE e.transition_key IN keys
  AND e.verdict = 'passed' AND e.speedup IS NOT NULL AND e.review_status <> 'rejected' AND NOT coalesce(e.held, false)
RETURN {EXAMPLE_LIGHT} AS e
ORDER BY e.speedup DESC, e.id LIMIT $limit
"""

RENAME_TRANSITION_KEYS = """
UNWIND $rows AS row
MATCH ()-[r:TRANSITION {key: row.old}]->()
SET r.key = row.new, r.candidates_rev = randomUUID()
WITH row
MATCH (e:Example {transition_key: row.old})
SET e.transition_key = row.new, e.source = row.source, e.target = row.target
"""

DELETE_TRANSITIONS = "UNWIND $keys AS key MATCH ()-[r:TRANSITION {key: key}]->() DELETE r"

# --- examples ---------------------------------------------------------------------------------------

EXISTING_EXAMPLE_IDS = "MATCH (e:Example) WHERE e.id IN $ids RETURN e.id AS id"

CREATE_EXAMPLES = "UNWIND $rows AS row CREATE (e:Example) SET e = row"

GET_EXAMPLE = f"MATCH (e:Example {{id: $id}}) RETURN {EXAMPLE_FULL} AS e"

LIST_EXAMPLES_OF_TRANSITION = f"""
MATCH (e:Example {{transition_key: $key}})
WHERE $status IS NULL OR e.review_status = $status
RETURN {EXAMPLE_LIGHT} AS e
ORDER BY e.created_at, e.id SKIP $offset LIMIT $limit
"""

# The lists of one review status: the examples held for a curator first (issue 33), then the others, each
# group oldest first. Each group is read in the order of the index `example_review_queue_held` (V008)
# and only as far as the page goes, instead of sorting every example of the status: the held ones, then
# (UNION ALL yields its first part's rows before its second's) the others. The planner uses the index
# for this only with a predicate on each of its properties (hence the IS NOT NULLs: every example has
# them, V008 gave `held` to the older ones) and takes its order only for an ORDER BY that starts with its
# first property (one value in each part, so the order is unchanged). One ORDER BY `e.held DESC,
# e.created_at` would sort the whole status instead: an index gives its order in one direction only.
REVIEW_ORDER = """
CALL () {
  MATCH (e:Example {review_status: $status, held: true})
  WHERE e.created_at IS NOT NULL AND e.id IS NOT NULL
  WITH e ORDER BY e.review_status, e.held, e.created_at, e.id RETURN e
  UNION ALL
  MATCH (e:Example {review_status: $status, held: false})
  WHERE e.created_at IS NOT NULL AND e.id IS NOT NULL
  WITH e ORDER BY e.review_status, e.held, e.created_at, e.id RETURN e
}
WITH e"""

LIST_EXAMPLES_BY_STATUS = f"""{REVIEW_ORDER} SKIP $offset LIMIT $limit
RETURN {EXAMPLE_LIGHT} AS e
"""

# What a list of examples shows (no code, no reasoning), a page of one review status.
LIST_EXAMPLE_SUMMARIES_BY_STATUS = f"""{REVIEW_ORDER} SKIP $offset LIMIT $limit
RETURN e {{.id, .source, .target, .task_id, .device, .speedup, .verdict, .trajectory_id, .step_index}} AS e
"""

# The review queue's page in one round trip (the page was five): the visitor's key, the pending examples
# as summaries, the one shown in full (the selected one if it passes the filters, else the first that
# does), its transition and every technique's name. `ReviewQueueFilter.keeps` is the same filter in Python.
REVIEW_QUEUE_PAGE = f"""
OPTIONAL MATCH (k:ApiKey {{key_hash: $key_hash}})
WITH k {{.*}} AS key
CALL {{{REVIEW_ORDER} LIMIT $limit
  RETURN collect(e {{.id, .source, .target, .task_id, .device, .speedup, .verdict, .trajectory_id,
                    .step_index}}) AS pending
}}
WITH key, pending, [s IN pending WHERE
    ($technique IS NULL OR $technique IN [s.source, s.target])
    AND ($transition IS NULL OR s.source + ' -> ' + s.target = $transition)
    AND ($task IS NULL OR s.task_id = $task)
    AND ($device IS NULL OR s.device = $device)
    AND ($min_speedup IS NULL OR (s.speedup IS NOT NULL AND s.speedup >= $min_speedup))] AS shown
WITH key, pending, coalesce(head([s IN shown WHERE s.id = $selected]), head(shown)).id AS shown_id
OPTIONAL MATCH (e:Example {{id: shown_id}})
OPTIONAL MATCH (:Technique {{name: e.source}})-[r:TRANSITION]->(:Technique {{name: e.target}})
CALL {{
  MATCH (t:Technique)
  WITH t.name AS name ORDER BY name
  RETURN collect(name) AS names
}}
RETURN key, pending, {EXAMPLE_LIGHT} AS example, {TRANSITION_PUBLIC} AS transition, names
"""

SET_REVIEW_STATUS = """
MATCH (e:Example {id: $id})
SET e.review_status = $status, e.review_reason = $reason,
    e.held = CASE WHEN $status = 'pending' THEN e.held ELSE false END
RETURN e.transition_key AS key
"""

DELETE_EXAMPLE = "MATCH (e:Example {id: $id}) WITH e, e.transition_key AS key DELETE e RETURN key"

# Moves examples (rows: id, source, target, key) to other transitions; the caller recomputes stats.
RETARGET_EXAMPLES = """
UNWIND $rows AS row
MATCH (e:Example {id: row.id})
SET e.source = row.source, e.target = row.target, e.transition_key = row.key
"""

EXAMPLES_OF_KEYS_WITH_LABEL = """
MATCH (e:Example) WHERE e.transition_key IN $keys
  AND ((e.target = $technique AND e.target_label = $label) OR (e.source = $technique AND e.source_label = $label))
RETURN e.id AS id, e.source AS source, e.target AS target, e.source_label AS source_label,
       e.target_label AS target_label
"""

EXAMPLE_IDS_OF_KEYS = """
MATCH (e:Example) WHERE e.transition_key IN $keys
RETURN e.id AS id, e.source AS source, e.target AS target
"""

# --- retrieval --------------------------------------------------------------------------------------

# The retrieval queries take their lists inside one map parameter, `$lists`: Neo4j plans a query anew
# for each size range of a list parameter (0, 1, 2-10, 11-100, over 100 items), a few hundred ms each,
# which the search's per-step call cannot afford when the sizes vary from call to call; a list inside a
# map leaves the cached plan as it is.

# One hop from a technique: each successor's statistics, its `candidates_rev`, and a prefix of its
# retrieval candidates (see `r.candidate_ids` above) as parallel lists: ids, speedups and packed float32
# code vectors, except for the transitions whose revision is in `known` (the caller has them cached).
# The store ranks the candidates by cosine in Python (graphdb/vectors.py): a byte array is one value to
# read, where the float list `code_embedding` and a Cypher cosine per candidate were most of the call's
# time. Examples written before `code_vector` existed are listed in `legacy` (their vectors are read
# separately, by `CODE_EMBEDDINGS_BY_IDS`). No candidate text: only the examples in `texts` (those the
# caller expects to return, from its cached candidates) come with theirs; the others it returns are
# read by `EXAMPLES_BY_IDS`. Everything comes back as one row: each record costs the driver more than
# its size.
SUCCESSORS = f"""
MATCH (s:Technique {{name: $name}})-[r:TRANSITION]->(t:Technique)
WHERE r.n_examples > 0
WITH s, r, t, coalesce(r.candidates_rev IN $lists.known, false) AS cached
CALL (r, cached) {{
  UNWIND CASE WHEN cached THEN [] ELSE coalesce(r.candidate_ids, [])[0..$scan_limit] END AS id
  MATCH (e:Example {{id: id}})
  RETURN collect(e.id) AS ids, collect(coalesce(e.speedup, 0.0)) AS speedups,
         collect(e.code_vector) AS vectors, collect(CASE WHEN e.code_vector IS NULL THEN e.id END) AS legacy
}}
WITH s, r, t, cached, ids, speedups, vectors, legacy ORDER BY t.name
WITH collect({{r: {TRANSITION_PUBLIC}, rev: r.candidates_rev, cached: cached, source: s.name,
              target: t.name, ids: ids, speedups: speedups, vectors: vectors, legacy: legacy}}) AS successors
CALL () {{
  UNWIND $lists.texts AS id
  MATCH (e:Example {{id: id}})
  RETURN collect({retrieved_projection(None)}) AS examples
}}
RETURN successors, examples
"""

CODE_EMBEDDINGS_BY_IDS = """
UNWIND $lists.ids AS id
MATCH (e:Example {id: id})
RETURN collect([e.id, e.code_embedding]) AS vectors
"""

# The examples retrieval returns, by id, in one row (no embedding).
EXAMPLES_BY_IDS = f"""
UNWIND $lists.ids AS id
MATCH (e:Example {{id: id}})
RETURN collect({retrieved_projection(None)}) AS examples
"""

# Opt-in complement of the candidates: the global vector index, restricted to the given transitions.
SIMILAR_EXAMPLES_IN_KEYS = """
CALL db.index.vector.queryNodes('example_code_embedding', $candidates, $embedding) YIELD node AS e, score
WHERE e.transition_key IN $lists.keys AND e.review_status <> 'rejected' AND NOT coalesce(e.held, false)
RETURN e.id AS id, e.transition_key AS key, coalesce(e.speedup, 0.0) AS speedup, score
"""

SIMILAR_EXAMPLES = f"""
CALL db.index.vector.queryNodes('example_code_embedding', $candidates, $embedding) YIELD node AS e, score
WHERE e.review_status <> 'rejected' AND NOT coalesce(e.held, false)
RETURN {retrieved_projection("score")} AS e
ORDER BY score DESC, coalesce(e.speedup, 0.0) DESC, e.id
LIMIT $k
"""

# --- relabel decisions, audit, API keys, trajectories ----------------------------------------------

CREATE_DECISIONS = "UNWIND $rows AS row CREATE (d:RelabelDecision) SET d = row"

GET_DECISION = "MATCH (d:RelabelDecision {id: $id}) RETURN d {.*} AS d"

LIST_DECISIONS = """
MATCH (d:RelabelDecision)
WHERE ($outcome IS NULL OR d.outcome = $outcome) AND ($include_undone OR d.undone_at IS NULL)
RETURN d {.*} AS d
ORDER BY d.at DESC, d.id SKIP $offset LIMIT $limit
"""

MARK_DECISION_UNDONE = """
MATCH (d:RelabelDecision {id: $id})
SET d.undone_at = $at, d.undone_by = $actor
"""

CREATE_AUDIT = "UNWIND $rows AS row CREATE (a:AuditEntry) SET a = row"

LIST_AUDIT = """
MATCH (a:AuditEntry)
WHERE $target IS NULL OR a.target = $target
RETURN a {.*} AS a
ORDER BY a.at DESC, a.id SKIP $offset LIMIT $limit
"""

CREATE_API_KEY = "CREATE (k:ApiKey) SET k = $row"

GET_API_KEY_BY_HASH = "MATCH (k:ApiKey {key_hash: $key_hash}) RETURN k {.*} AS k"

LIST_API_KEYS = "MATCH (k:ApiKey) RETURN k {.*} AS k ORDER BY k.created_at, k.id"

# Write-locks every admin key, live or not, in one order, so that revocations run one after the other.
# The filter is on the role only, which never changes: a filter on `revoked_at` is evaluated before the
# lock is granted and not again, so a revocation that waited for another would still count the key the
# other one revoked (both admins revoking each other both succeeded). Read who is live after it.
LOCK_ADMIN_KEYS = """
MATCH (a:ApiKey {role: 'admin'})
WITH a ORDER BY a.id
SET a._lock = true
REMOVE a._lock
RETURN count(a) AS locked
"""

LIVE_ADMIN_KEY_IDS = "MATCH (a:ApiKey {role: 'admin'}) WHERE a.revoked_at IS NULL RETURN a.id AS id"

REVOKE_API_KEY = """
MATCH (k:ApiKey {id: $id})
SET k.revoked_at = coalesce(k.revoked_at, $at)
RETURN k {.*} AS k
"""

TRAJECTORY_EXISTS = "MATCH (t:Trajectory {id: $id}) RETURN t.id AS id"

CREATE_TRAJECTORIES = "UNWIND $rows AS row CREATE (t:Trajectory) SET t = row"

LIST_TRAJECTORIES = (
    "MATCH (t:Trajectory) RETURN t {.*} AS t ORDER BY t.ingested_at, t.id SKIP $offset LIMIT $limit"
)

# --- export / import --------------------------------------------------------------------------------

EXPORT_TECHNIQUES = f"MATCH (t:Technique) RETURN {TECHNIQUE_FULL} AS t ORDER BY t.name"
EXPORT_TRANSITIONS = f"""
MATCH (s:Technique)-[r:TRANSITION]->(t:Technique)
RETURN {TRANSITION_PUBLIC} AS r, s.name AS source, t.name AS target ORDER BY r.key
"""
EXPORT_EXAMPLES = f"MATCH (e:Example) RETURN {EXAMPLE_FULL} AS e ORDER BY e.id"
EXPORT_DECISIONS = "MATCH (d:RelabelDecision) RETURN d {.*} AS d ORDER BY d.at, d.id"
EXPORT_AUDIT = "MATCH (a:AuditEntry) RETURN a {.*} AS a ORDER BY a.at, a.id"
EXPORT_TRAJECTORIES = "MATCH (t:Trajectory) RETURN t {.*} AS t ORDER BY t.ingested_at, t.id"

# The graph's knowledge, which an import must not mix with: API keys and the audit log are the
# deployment's own records and the initial node is created by every build, so none of them count.
COUNT_KNOWLEDGE_NODES = """
CALL () { MATCH (t:Technique) WHERE t.name <> $initial RETURN count(t) AS techniques }
CALL () { MATCH (e:Example) RETURN count(e) AS examples }
CALL () { MATCH (d:RelabelDecision) RETURN count(d) AS decisions }
CALL () { MATCH (t:Trajectory) RETURN count(t) AS trajectories }
RETURN techniques, examples, decisions, trajectories
"""

EXISTING_AUDIT_IDS = "MATCH (a:AuditEntry) WHERE a.id IN $ids RETURN a.id AS id"

IMPORT_TRANSITIONS = """
UNWIND $rows AS row
MATCH (s:Technique {name: row.source}), (t:Technique {name: row.target})
CREATE (s)-[r:TRANSITION]->(t) SET r = row.props
"""

COUNTS = """
CALL () { MATCH (t:Technique) RETURN count(t) AS techniques }
CALL () { MATCH ()-[r:TRANSITION]->() RETURN count(r) AS transitions }
CALL () { MATCH (e:Example) RETURN count(e) AS examples }
RETURN techniques, transitions, examples
"""

# --- undoing a technique merge (see Neo4jCuration.merge_techniques / undo_merge) ---------------------

GET_AUDIT = "MATCH (a:AuditEntry {id: $id}) RETURN a {.*} AS a"

# Serializes work on one technique: two undos of one merge run one after the other.
LOCK_TECHNIQUE = """
MATCH (t:Technique {name: $name})
SET t._lock = true
REMOVE t._lock
RETURN t.name AS name, coalesce(t.aliases, []) AS aliases
"""

SET_ALIASES = """
MATCH (t:Technique {name: $technique})
SET t.aliases = $aliases
RETURN t.name AS name
"""

# What the export reads of the transitions with these keys (their statistics), with both ends.
TRANSITIONS_BY_KEYS = f"""
MATCH (s:Technique)-[r:TRANSITION]->(t:Technique) WHERE r.key IN $keys
RETURN {TRANSITION_PUBLIC} AS r, s.name AS source, t.name AS target ORDER BY r.key
"""

# Rows: key, stats (a map of TRANSITION_STAT_PROPERTIES; a null removes the property, as it was).
SET_TRANSITION_STATS = """
UNWIND $rows AS row
MATCH ()-[r:TRANSITION {key: row.key}]->()
SET r += row.stats
"""

EXAMPLE_KEYS_BY_IDS = "MATCH (e:Example) WHERE e.id IN $ids RETURN e.id AS id, e.transition_key AS key"
