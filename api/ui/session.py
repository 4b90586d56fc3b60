"""Signed-in sessions of the curation workspace and their CSRF tokens.

The session table lives in the API process: a cookie holds only a random session id, and the API key
token it stands for never leaves the server again. Each request looks the token up through the graph
service (as the HTTP API does), so a revoked key signs its sessions out at their next request.
Sessions end on sign-out, after `ttl_s` without use, or when the process restarts.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

SESSION_COOKIE = "regraph_session"
LOGIN_COOKIE = "regraph_login"  # double-submit token of the sign-in form (there is no session yet)
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"


@dataclass
class Session:
    """One signed-in browser: the key token it signed in with and its CSRF token."""

    id: str
    token: str
    csrf: str
    last_seen: float
    flashes: list[tuple[str, str]] = field(default_factory=list)  # (kind, message) shown once


class SessionStore:
    """In-memory sessions, each expiring after `ttl_s` seconds unused."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def create(self, token: str) -> Session:
        """A new session for a key token that has just been checked."""
        session = Session(
            id=secrets.token_urlsafe(32),
            token=token,
            csrf=secrets.token_urlsafe(32),
            last_seen=self.clock(),
        )
        with self._lock:
            self._expire_locked()
            self._sessions[session.id] = session
        return session

    @staticmethod
    def new_login_token() -> str:
        """A fresh double-submit token for the sign-in form."""
        return secrets.token_urlsafe(32)

    def get(self, session_id: str | None) -> Session | None:
        """The live session of this id (its idle clock restarted), or None."""
        if not session_id:
            return None
        now = self.clock()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if now - session.last_seen > self.ttl_s:
                del self._sessions[session_id]
                return None
            session.last_seen = now
            return session

    def end(self, session_id: str | None) -> None:
        """Sign a session out (nothing happens for an unknown id)."""
        if session_id:
            with self._lock:
                self._sessions.pop(session_id, None)

    def _expire_locked(self) -> None:
        now = self.clock()
        for sid in [s.id for s in self._sessions.values() if now - s.last_seen > self.ttl_s]:
            del self._sessions[sid]


def tokens_match(expected: str, given: str | None) -> bool:
    """Constant-time comparison of a CSRF token."""
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())
