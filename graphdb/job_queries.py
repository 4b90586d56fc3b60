"""Cypher of the job store (`graphdb/jobs.py`): named constants, values always as $parameters."""

from __future__ import annotations

JOB_FIELDS = """
j {.id, .state, .method, .task_id, .request, .result, .error, .created_at, .started_at, .finished_at,
   .updated_at, .event_count, .owner}
"""

CREATE_JOB = f"""
CREATE (j:Job {{
  id: $id, state: 'queued', method: $method, task_id: $task_id, request: $request, result: null,
  error: null, created_at: $now, started_at: null, finished_at: null, updated_at: $now, event_count: 0,
  owner: $owner
}})
RETURN {JOB_FIELDS} AS job
"""

GET_JOB = f"MATCH (j:Job {{id: $id}}) RETURN {JOB_FIELDS} AS job"

LIST_JOBS = f"""
MATCH (j:Job)
WHERE ($state IS NULL OR j.state = $state) AND ($owner IS NULL OR j.owner = $owner)
RETURN {JOB_FIELDS} AS job
ORDER BY j.created_at DESC, j.id
SKIP $offset LIMIT $limit
"""

# A state change only happens from the states named in the WHERE; otherwise nothing matches and the
# caller tells "unknown job" from "wrong state" with GET_JOB.
START_JOB = f"""
MATCH (j:Job {{id: $id}}) WHERE j.state = 'queued'
SET j.state = 'running', j.started_at = $now, j.updated_at = $now
RETURN {JOB_FIELDS} AS job
"""

FINISH_JOB = f"""
MATCH (j:Job {{id: $id}}) WHERE j.state IN ['queued', 'running']
SET j.state = $state, j.result = $result, j.error = $error, j.finished_at = $now, j.updated_at = $now
RETURN {JOB_FIELDS} AS job
"""

FAIL_UNFINISHED = """
MATCH (j:Job) WHERE j.state IN ['queued', 'running']
SET j.error = $reason + ' (it was ' + j.state + ')', j.state = 'failed', j.finished_at = $now,
    j.updated_at = $now
RETURN j.id AS id
"""

# Events keep their order by `seq`; only the newest $keep of a job are kept.
APPEND_EVENT = """
MATCH (j:Job {id: $job_id})
CREATE (e:JobEvent {job_id: $job_id, seq: $seq, kind: $kind, payload: $payload, at: $now})
SET j.event_count = j.event_count + 1, j.updated_at = $now
WITH j
CALL (j) {
  MATCH (old:JobEvent {job_id: j.id}) WHERE old.seq <= $seq - $keep
  DELETE old
}
RETURN j.id AS id
"""

LIST_EVENTS = """
MATCH (e:JobEvent {job_id: $job_id}) WHERE e.seq > $after
RETURN e.seq AS seq, e.kind AS kind, e.payload AS payload, e.at AS at
ORDER BY e.seq
"""
