// The relabel review queue: decisions are listed by outcome and whether a curator resolved them.
// Append-only: never edit this file once applied; add V007__... instead.

CREATE INDEX relabel_decision_outcome IF NOT EXISTS
FOR (d:RelabelDecision) ON (d.outcome);

CREATE INDEX relabel_decision_resolved_at IF NOT EXISTS
FOR (d:RelabelDecision) ON (d.resolved_at);
