// The review queue and the lists of examples by review status read the oldest examples of one status
// first (ORDER BY created_at, id). With this index the database reads them in that order and stops at
// the page's end, instead of sorting every example of the status (100k pending ones on a large graph).
// Append-only: never edit this file once applied; add V008__... instead.

CREATE INDEX example_review_queue IF NOT EXISTS
FOR (e:Example) ON (e.review_status, e.created_at, e.id);
