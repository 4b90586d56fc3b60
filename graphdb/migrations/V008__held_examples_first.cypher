// The review queue lists the examples held for a curator first (issue 33: a speedup beyond what the
// graph has seen), then the others, each group oldest first. Every example gets `held` (false where an
// example written before the property lacks it), so that this index holds every example and the queue
// reads each group in the index's order, only as far as the page goes.
// Append-only: never edit this file once applied; add V009__... instead.

MATCH (e:Example) WHERE e.held IS NULL
SET e.held = false;

CREATE INDEX example_review_queue_held IF NOT EXISTS
FOR (e:Example) ON (e.review_status, e.held, e.created_at, e.id);

// The index of V007 (review_status, created_at, id) is read by nothing now: one index less to write.
DROP INDEX example_review_queue IF EXISTS;
