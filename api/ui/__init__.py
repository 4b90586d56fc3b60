"""The curation workspace: server-rendered pages under ``/ui`` over the same services as the HTTP API.

A person signs in with an API key; the key stays on the server, in a session that an HttpOnly,
SameSite=Strict cookie names. Every write is a form post carrying the session's CSRF token, and goes
through the feature's service with the key's name as the actor, so it lands in the audit log exactly as
an API call would.

This package is the shell: `shell` assembles every feature's pages (``api/<feature>/ui.py``) and serves
the assets and sign-in, `visitor` is the one module those pages use (the visitor, its session and
CSRF check, the error mapping), `render` the templates and formatters, `session` the session table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from api.settings import ApiSettings


def mount(app: FastAPI, settings: ApiSettings) -> None:
    """Serve the curation workspace under /ui on `app` (`api.ui.shell.mount`)."""
    # Imported here, not above: every feature's ui.py imports this package (through api.ui.visitor),
    # and the shell imports every feature's ui.py.
    from api.ui.shell import mount as mount_shell

    mount_shell(app, settings)


__all__ = ["mount"]
