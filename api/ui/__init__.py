"""The curation workspace: server-rendered pages under ``/ui`` over the same services as the HTTP API.

A person signs in with an API key; the key stays on the server, in a session that an HttpOnly,
SameSite=Strict cookie names. Every write is a form post carrying the session's CSRF token, and goes
through `api.graph.service.GraphService` or `api.optimize.service.JobService` with the key's name as
the actor, so it lands in the audit log exactly as an API call would.
"""

from api.ui.router import mount

__all__ = ["mount"]
