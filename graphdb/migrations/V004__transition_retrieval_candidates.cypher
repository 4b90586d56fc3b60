// Retrieval and ingestion bookkeeping on every transition: `r.candidate_ids` (its retrieval
// candidates) and `r.verified_speedups` (what its statistics are computed from). The store keeps them
// up to date on every write from now on (graphdb/store_queries.py, with CANDIDATES_PER_TRANSITION =
// 32); this backfills transitions written before. Append-only: never edit this file once applied; add a
// newer V###__ file instead.
MATCH ()-[r:TRANSITION]->()
WHERE r.candidate_ids IS NULL OR r.verified_speedups IS NULL
WITH r, r.key AS row
CALL (r) {
  OPTIONAL MATCH (e:Example {transition_key: r.key})
  RETURN count(e) AS total,
         sum(CASE WHEN e.review_status = 'rejected' THEN 1 ELSE 0 END) AS n_rejected
}
CALL (r) {
  OPTIONAL MATCH (e:Example {transition_key: r.key})
  WHERE e.review_status <> 'rejected' AND e.verdict = 'passed' AND e.speedup IS NOT NULL
  RETURN collect(e.speedup) AS speedups
}
CALL (r, row) {
  MATCH (e:Example {transition_key: r.key}) WHERE e.review_status <> 'rejected'
  WITH e ORDER BY CASE WHEN e.verdict = 'passed' THEN coalesce(e.speedup, -1.0) ELSE -1.0 END DESC, e.id
  LIMIT 32
  RETURN collect(e.id) AS best
}
CALL (r, row) {
  MATCH (e:Example {transition_key: r.key}) WHERE e.review_status <> 'rejected'
  WITH e ORDER BY e.created_at DESC, e.id DESC
  LIMIT 32
  RETURN collect(e.id) AS recent
}
WITH r, total, n_rejected, speedups, best, recent, total - n_rejected AS live
SET r.verified_speedups = speedups, r.candidate_ids = reduce(acc = [], i IN range(0, CASE WHEN live <= 32 THEN 32 ELSE 32 / 2 END - 1) |
         reduce(a = acc, x IN [best[i], recent[i]] | CASE WHEN x IS NULL OR x IN a THEN a ELSE a + x END));
