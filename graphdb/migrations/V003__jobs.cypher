// Optimization jobs of the API (`graphdb/jobs.py`): one Job node per request, its progress events as
// JobEvent nodes. Append-only: never edit this file once applied; add a newer V###__ file instead.

CREATE CONSTRAINT job_id_unique IF NOT EXISTS
FOR (j:Job) REQUIRE j.id IS UNIQUE;

// Start-up looks for jobs a previous process left queued or running.
CREATE INDEX job_state IF NOT EXISTS
FOR (j:Job) ON (j.state);

CREATE INDEX job_created_at IF NOT EXISTS
FOR (j:Job) ON (j.created_at);

// Events are appended and replayed in order per job.
CREATE INDEX job_event_job_seq IF NOT EXISTS
FOR (e:JobEvent) ON (e.job_id, e.seq);
