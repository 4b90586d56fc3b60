// Indexes for the graph store's one-hop queries and the curation records (relabel decisions, audit,
// API keys). Append-only: never edit this file once applied; add V003__... instead.

// Retrieval finds a transition's examples by their key; statistics filter by review status.
CREATE INDEX example_transition_key IF NOT EXISTS
FOR (e:Example) ON (e.transition_key);

CREATE INDEX example_review_status IF NOT EXISTS
FOR (e:Example) ON (e.review_status);

CREATE INDEX example_task_id IF NOT EXISTS
FOR (e:Example) ON (e.task_id);

// Transitions are looked up by key when examples are added or moved.
CREATE INDEX transition_key IF NOT EXISTS
FOR ()-[r:TRANSITION]-() ON (r.key);

CREATE CONSTRAINT relabel_decision_id_unique IF NOT EXISTS
FOR (d:RelabelDecision) REQUIRE d.id IS UNIQUE;

CREATE INDEX relabel_decision_at IF NOT EXISTS
FOR (d:RelabelDecision) ON (d.at);

CREATE CONSTRAINT audit_entry_id_unique IF NOT EXISTS
FOR (a:AuditEntry) REQUIRE a.id IS UNIQUE;

CREATE INDEX audit_entry_at IF NOT EXISTS
FOR (a:AuditEntry) ON (a.at);

CREATE CONSTRAINT api_key_id_unique IF NOT EXISTS
FOR (k:ApiKey) REQUIRE k.id IS UNIQUE;

CREATE CONSTRAINT api_key_hash_unique IF NOT EXISTS
FOR (k:ApiKey) REQUIRE k.key_hash IS UNIQUE;
