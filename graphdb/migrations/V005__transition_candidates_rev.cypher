// A revision on every transition, `r.candidates_rev`: random, and new on every write that may change
// what retrieval returns about the transition's candidates, so a process may cache what it read under
// it (graphdb/retrieval_cache.py). The store sets it from now on (graphdb/store_queries.py); this gives
// one to the transitions written before, which are read afresh until they have it. Append-only: never
// edit this file once applied; add a newer V###__ file instead.
MATCH ()-[r:TRANSITION]->()
WHERE r.candidates_rev IS NULL
SET r.candidates_rev = randomUUID();
