"""The visitor of the curation workspace: who signed in, their session and CSRF token, and the one
mapping of service errors to what a page shows.

Every feature's pages (``api/<feature>/ui.py``) take a `Visit` (the signed-in caller, the session) and
the service of their feature (`api.deps.TechniqueServiceDep` and the others) for a read and a `WriteDep` visit, which also passed the origin and CSRF checks, for a write;
a write calls the same service method as the HTTP API's route, with the key's name as the actor. A
service error becomes a message on the next page (post, redirect, get) through `Visit.reported`, or a
status and a message through `problem`: those two are the /ui face's whole error mapping.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

import anyio
from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.datastructures import FormData

from api.auth import Caller
from api.cypher.run import run_reader_cypher
from api.deps import KeyServiceDep, StateDep
from api.errors import HttpError, ServiceError, ServiceUnavailableError, http_error
from api.graph.errors import GraphServiceError, GraphUnavailableError, InvalidApiKeyError
from api.optimize.stream import event_stream_response
from api.settings import ApiSettings
from api.techniques.service import TechniqueService
from api.ui.render import templates
from api.ui.session import CSRF_FIELD, CSRF_HEADER, SESSION_COOKIE, Session, SessionStore, tokens_match
from graphdb.models import Role

__all__ = [
    "PAGE",
    "SERVICE_ERRORS",
    "UNDO_NOTE",
    "SignInRequired",
    "UiRefused",
    "Visit",
    "VisitDep",
    "WriteDep",
    "confirm",
    "event_stream_response",
    "in_thread",
    "origin_ok",
    "problem",
    "run_reader_cypher",
    "see",
    "signed_in",
    "what_moves",
]

logger = logging.getLogger(__name__)

PAGE = 1000  # the API's largest page; lists longer than this are read page by page
UNDO_NOTE = "A merge can be undone from the audit log while nothing it moved has changed since."

T = TypeVar("T")

# Every service error a page may meet (the one root): each becomes a message, never a second path to
# the graph.
SERVICE_ERRORS = (ServiceError,)


def problem(error: ServiceError) -> HttpError:
    """The /ui face's one error mapping: a service error's type, status and message, as the HTTP API
    answers it (a page shows the message; the Cypher console, a job's events and the graph's side
    panel also its type or status)."""
    return http_error(error)


class SignInRequired(Exception):
    """The request has no live session: the browser is sent to the sign-in page."""

    def __init__(self, next_url: str, message: str = "") -> None:
        super().__init__(message or "sign in first")
        self.next_url = next_url
        self.message = message


class UiRefused(Exception):
    """A write the workspace refuses outright (a failed CSRF check, a role too low): a 403 page."""


@dataclass
class Visit:
    """One request of a signed-in person: who, their session, the app's settings and the form posted."""

    request: Request
    session: Session
    caller: Caller
    settings: ApiSettings
    form: FormData | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def may(self, role: Role) -> bool:
        """Whether the caller's role is at least `role`."""
        return self.caller.may(role)

    def require(self, role: Role) -> None:
        """Refuse the request unless the caller's role is at least `role`."""
        if not self.may(role):
            raise UiRefused(
                f"this needs the {role.value} role; you are signed in as {self.caller.role.value}"
            )

    def flash(self, kind: str, message: str) -> None:
        """A message shown once on the next page."""
        self.session.flashes.append((kind, message))

    def field(self, name: str, default: str = "") -> str:
        """A text field of the posted form, stripped."""
        value = self.form.get(name) if self.form is not None else None
        return value.strip() if isinstance(value, str) else default

    def fields(self, name: str) -> list[str]:
        """Every value of a repeated field of the posted form (checked boxes), stripped, blanks and
        repeats left out, in the form's order."""
        values = self.form.getlist(name) if self.form is not None else []
        return list(dict.fromkeys(v.strip() for v in values if isinstance(v, str) and v.strip()))

    def render(self, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        """A page, with the layout's context (who, what they may do, messages, the CSRF token)."""
        flashes, self.session.flashes = self.session.flashes, []
        context.update(
            caller=self.caller,
            may_curate=self.may(Role.CURATOR),
            may_admin=self.may(Role.ADMIN),
            csrf=self.session.csrf,
            flashes=flashes,
        )
        response = templates.TemplateResponse(self.request, template, context, status_code=status_code)
        if self.request.headers.get("hx-request"):
            # After a post and its redirect, the address bar shows the page rendered, not the post's.
            # A page rendered by a post itself (the Cypher console, a new key) keeps the address it had.
            url = self.request.url
            pushed = url.path + (f"?{url.query}" if url.query else "")
            response.headers["HX-Push-Url"] = pushed if self.request.method == "GET" else "false"
        return response

    @contextmanager
    def reported(self, done: str = "") -> Iterator[None]:
        """Run a service call; its error becomes an error message, its success `done` (if any)."""
        try:
            yield
        except SERVICE_ERRORS as e:
            self.flash("error", problem(e).message)
        else:
            if done:
                self.flash("ok", done)


def see(url: str) -> RedirectResponse:
    """Go on to `url` (after a post: post, redirect, get)."""
    return RedirectResponse(url, status_code=303)


def confirm(visit: Visit, title: str, what: str, cancel: str, *, undo_note: str = "") -> HTMLResponse | None:
    """The confirm step of a destructive action: None once confirmed, else the page that asks.

    The page re-posts the form's fields with `confirmed=yes` to the same address.
    """
    if visit.field("confirmed") == "yes":
        return None
    # Every value of every field, a repeated one (the examples of a bulk review) included.
    given = visit.form.multi_items() if visit.form is not None else []
    fields = [(k, v) for k, v in given if isinstance(v, str) and k not in ("csrf", "confirmed")]
    return visit.render(
        "confirm.html",
        title=title,
        what=what,
        undo_note=undo_note,
        action=visit.request.url.path,
        fields=fields,
        cancel=cancel,
    )


def what_moves(techniques: TechniqueService, name: str) -> str:
    """How much a merge of technique `name` moves (its transitions and examples), for its confirm step."""
    try:
        transitions = techniques.transitions_of(name)
    except GraphServiceError:  # the merge itself reports the error after the confirm step
        return "its transitions and examples"
    examples = sum(t.stats.n_examples + t.stats.n_rejected for t in transitions)
    return f"{len(transitions)} transition(s) and {examples} example(s)"


def origin_ok(request: Request) -> bool:
    """Whether a post is same-site: browsers send Origin on every cross-site post, and one that names
    another site is refused outright."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return origin.split("://", 1)[-1] == host


async def in_thread(call: Callable[[], T]) -> T:
    """Run a blocking service call off the event loop."""
    return await anyio.to_thread.run_sync(call)


def sessions_of(request: Request) -> SessionStore:
    """The app's session table (one per app, made by the shell's `mount`)."""
    sessions: SessionStore = request.app.state.ui_sessions
    return sessions


def live_session(request: Request) -> tuple[Session, str]:
    """The request's live session and the address it asked for; the sign-in page for anyone else."""
    session = sessions_of(request).get(request.cookies.get(SESSION_COOKIE))
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if session is None:
        raise SignInRequired(target)
    return session, target


@contextmanager
def signed_in(request: Request, session: Session, target: str) -> Iterator[None]:
    """Check a session's key: a key no longer live ends the session and sends the browser to sign in
    again; a graph that cannot be reached is a 503."""
    try:
        yield
    except InvalidApiKeyError as e:
        sessions_of(request).end(session.id)
        raise SignInRequired(target, "your API key is no longer valid: sign in again") from e
    except GraphUnavailableError as e:
        raise ServiceUnavailableError(str(e)) from e


def get_visit(request: Request, state: StateDep, keys: KeyServiceDep) -> Visit:
    """The signed-in visitor of this request; the sign-in page for anyone else."""
    session, target = live_session(request)
    with signed_in(request, session, target):
        key = keys.key_for_token(session.token)
    caller = Caller(name=key.name, role=key.role, key_id=key.id)
    return Visit(request, session, caller, state.settings)


VisitDep = Annotated[Visit, Depends(get_visit)]


async def get_write_visit(request: Request, visit: VisitDep) -> Visit:
    """A visitor's write: same-site, with the session's CSRF token in the form or a header."""
    if not origin_ok(request):
        raise UiRefused("the request came from another site (Origin check failed)")
    visit.form = await request.form()
    given = request.headers.get(CSRF_HEADER) or visit.field(CSRF_FIELD) or None
    if not tokens_match(visit.session.csrf, given):
        logger.warning("ui write refused: CSRF token missing or wrong", extra={"actor": visit.caller.name})
        raise UiRefused("the form's CSRF token is missing or wrong: reload the page and try again")
    return visit


WriteDep = Annotated[Visit, Depends(get_write_visit)]
