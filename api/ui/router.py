"""Routes of the curation workspace under ``/ui``: thin, like the API's routers.

Every page takes a `Visit` (the signed-in caller, the session, the graph service); every write takes
a `WriteVisit`, which also checked the form's CSRF token, and calls the same service method that the
HTTP API's route calls, with the key's name as the actor. Service errors become a message on the next
page (post, redirect, get), never a second path to the graph.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import urlencode

import anyio
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError
from starlette.datastructures import FormData, UploadFile

from api.auth import ANONYMOUS, Caller, get_graph_service
from api.deps import StateDep
from api.errors import ServiceUnavailableError
from api.graph.protocol import (
    ApiKeyCreate,
    CypherRequest,
    ExamplePublic,
    MergeRequest,
    ReviewRequest,
    SplitRequest,
    TechniqueUpdate,
    TransitionPublic,
)
from api.graph.service import (
    GraphService,
    GraphServiceError,
    GraphUnavailableError,
    InvalidApiKeyError,
    QueryFailedError,
    QueryRefusedError,
)
from api.limits import LimitError
from api.optimize.protocol import JobPublic, OptimizeCreate
from api.optimize.service import JobService, OptimizeError
from api.relabel.protocol import (
    DuplicateList,
    DuplicateMerge,
    KeptSeparateList,
    PairReview,
    QueueList,
    QueueMerge,
)
from api.routers.cypher import cypher_api_error, run_reader_cypher
from api.routers.optimize import api_error as optimize_api_error
from api.routers.optimize import event_stream_response
from api.routers.relabel import RelabelServiceDep
from api.settings import ApiSettings, default_cypher_examples
from api.ui.render import (
    as_text,
    fmt_speedup,
    highlight_css,
    side_by_side,
    speedup_colour,
    without_vectors,
)
from api.ui.session import (
    CSRF_FIELD,
    CSRF_HEADER,
    LOGIN_COOKIE,
    SESSION_COOKIE,
    Session,
    SessionStore,
    tokens_match,
)
from graphdb.models import (
    ExampleSummary,
    RelabelOutcome,
    ReviewQueueFilter,
    ReviewQueuePage,
    Role,
)
from search.baselines import METHODS
from search.protocols import INITIAL_TECHNIQUE

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
PAGE = 1000  # the API's largest page; lists longer than this are read page by page
QUEUE_LIMIT = 1000  # pending examples read for the review queue (filters apply to these)
GRAPH_EDGE_LIMIT = 3000  # transitions drawn by the graph view, the busiest first
GRAPH_TOP_EXAMPLES = 5  # examples of a transition listed in the graph's side panel
QUEUED_SHOWN = 200  # relabel decisions shown on the relabel queue page, the newest first
DUPLICATES_SHOWN = 200  # likely duplicate pairs shown, the most probable first
BEST_SHOWN = 6  # a technique page's best verified examples


def ui_assets(vendor: Path) -> dict[str, Path]:
    """Every asset the pages load, by the name they load it under: our own files and the pinned npm
    packages under `vendor` (settings.ui_vendor_dir; nothing is fetched from elsewhere at run time)."""
    return {
        "ui.css": HERE / "static" / "ui.css",
        "ui.js": HERE / "static" / "ui.js",
        "htmx.min.js": vendor / "htmx.org" / "dist" / "htmx.min.js",
        "cytoscape.min.js": vendor / "cytoscape" / "dist" / "cytoscape.min.js",
    }


templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters["speedup"] = fmt_speedup
templates.env.filters["speedup_colour"] = speedup_colour
templates.env.filters["as_text"] = as_text
templates.env.globals["INITIAL_TECHNIQUE"] = INITIAL_TECHNIQUE

T = TypeVar("T")


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
    """One request of a signed-in person: who, their session, and the services."""

    request: Request
    session: Session
    caller: Caller
    service: GraphService
    settings: ApiSettings
    jobs: JobService | None
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
        except (GraphServiceError, OptimizeError) as e:
            self.flash("error", str(e))
        else:
            if done:
                self.flash("ok", done)


def _see(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


UNDO_NOTE = "A merge can be undone from the audit log while nothing it moved has changed since."


def _confirm(visit: Visit, title: str, what: str, cancel: str, *, undo_note: str = "") -> HTMLResponse | None:
    """The confirm step of a destructive action: None once confirmed, else the page that asks.

    The page re-posts the form's fields with `confirmed=yes` to the same address.
    """
    if visit.field("confirmed") == "yes":
        return None
    form = visit.form if visit.form is not None else {}
    fields = [(k, v) for k, v in form.items() if isinstance(v, str) and k not in ("csrf", "confirmed")]
    return visit.render(
        "confirm.html",
        title=title,
        what=what,
        undo_note=undo_note,
        action=visit.request.url.path,
        fields=fields,
        cancel=cancel,
    )


def _what_moves(service: GraphService, name: str) -> str:
    """How much a merge of technique `name` moves: its transitions and examples."""
    try:
        transitions = service.transitions_of(name)
    except GraphServiceError:  # the merge itself reports the error after the confirm step
        return "its transitions and examples"
    examples = sum(t.stats.n_examples + t.stats.n_rejected for t in transitions)
    return f"{len(transitions)} transition(s) and {examples} example(s)"


def _safe_next(url: str | None) -> str:
    # Only our own pages: an open redirect after sign-in would hand the session to anyone's link.
    if url and url.startswith("/ui") and not url.startswith("//") and "\\" not in url:
        return url
    return "/ui/queue"


def _origin_ok(request: Request) -> bool:
    # Browsers send Origin on every cross-site post: one that names another site is refused outright.
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return origin.split("://", 1)[-1] == host


async def _in_thread(call: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(call)


def _technique_names(service: GraphService) -> list[str]:
    return service.technique_names()


def cypher_examples(path: Path | None = None) -> list[dict[str, Any]]:
    """The documented example queries: each `## title`, its ```cypher block and ```json parameters."""
    path = path or default_cypher_examples()
    if not path.is_file():
        return []
    out = []
    for section in re.split(r"^## ", path.read_text(), flags=re.MULTILINE)[1:]:
        title = section.splitlines()[0].strip()
        query = re.search(r"```cypher\n(.*?)```", section, re.DOTALL)
        params = re.search(r"```json\n(.*?)```", section, re.DOTALL)
        if query is not None:
            out.append(
                {
                    "title": title,
                    "query": query.group(1).strip(),
                    "parameters": params.group(1).strip() if params else "{}",
                }
            )
    return out


def _task_ids(tasks_dir: Path | None) -> list[str]:
    if tasks_dir is None or not tasks_dir.is_dir():
        return []
    return sorted(p.name for p in tasks_dir.iterdir() if (p / "task.json").is_file())


def _live_session(request: Request) -> tuple[Session, str]:
    """The request's live session and the address it asked for; the sign-in page for anyone else."""
    sessions: SessionStore = request.app.state.ui_sessions
    session = sessions.get(request.cookies.get(SESSION_COOKIE))
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if session is None:
        raise SignInRequired(target)
    return session, target


def _key_refused(request: Request, session: Session, target: str, e: InvalidApiKeyError) -> SignInRequired:
    """A session whose key is no longer live: it ends, and the browser is sent to sign in again."""
    request.app.state.ui_sessions.end(session.id)
    return SignInRequired(target, "your API key is no longer valid: sign in again")


def get_visit(request: Request, state: StateDep) -> Visit:
    """The signed-in visitor of this request; the sign-in page for anyone else."""
    session, target = _live_session(request)
    service = get_graph_service(state)
    try:
        key = service.key_for_token(session.token)
    except InvalidApiKeyError as e:
        raise _key_refused(request, session, target, e) from e
    except GraphUnavailableError as e:
        raise ServiceUnavailableError(str(e)) from e
    caller = Caller(name=key.name, role=key.role, key_id=key.id)
    return Visit(request, session, caller, service, state.settings, state.jobs)


VisitDep = Annotated[Visit, Depends(get_visit)]


async def get_write_visit(request: Request, visit: VisitDep) -> Visit:
    """A visitor's write: same-site, with the session's CSRF token in the form or a header."""
    if not _origin_ok(request):
        raise UiRefused("the request came from another site (Origin check failed)")
    visit.form = await request.form()
    given = request.headers.get(CSRF_HEADER) or visit.field(CSRF_FIELD) or None
    if not tokens_match(visit.session.csrf, given):
        logger.warning("ui write refused: CSRF token missing or wrong", extra={"actor": visit.caller.name})
        raise UiRefused("the form's CSRF token is missing or wrong: reload the page and try again")
    return visit


WriteDep = Annotated[Visit, Depends(get_write_visit)]


def build_router(sessions: SessionStore, settings: ApiSettings) -> APIRouter:
    """The /ui routes over `sessions` (one store per app)."""
    router = APIRouter(prefix="/ui", include_in_schema=False)
    examples_doc = cypher_examples(settings.cypher_examples_path)
    task_ids = _task_ids(settings.tasks_dir)

    # -- assets and sign-in ---------------------------------------------------------------------------

    @router.get("/static/highlight.css")
    def highlight_stylesheet() -> Response:
        return Response(highlight_css(), media_type="text/css", headers={"Cache-Control": "max-age=3600"})

    @router.get("/static/{name}")
    def asset(name: str) -> Response:
        path = ui_assets(settings.ui_vendor_dir).get(name)
        if path is None or not path.is_file():
            hint = " (run scripts/bootstrap.sh: npm ci)" if path is not None else ""
            return Response(f"no asset {name!r}{hint}", status_code=404, media_type="text/plain")
        return FileResponse(path, headers={"Cache-Control": "max-age=3600"})

    @router.get("", include_in_schema=False)
    def home() -> RedirectResponse:
        return _see("/ui/queue")

    @router.get("/login")
    def login_page(request: Request, next: str = "/ui/queue", message: str = "") -> HTMLResponse:
        return _login(request, next, message)

    def _login(request: Request, next_url: str, message: str, status_code: int = 200) -> HTMLResponse:
        login_token = request.cookies.get(LOGIN_COOKIE) or sessions.new_login_token()
        response = templates.TemplateResponse(
            request,
            "login.html",
            {"next": _safe_next(next_url), "message": message, "csrf": login_token, "caller": None},
            status_code=status_code,
        )
        response.set_cookie(
            LOGIN_COOKIE,
            login_token,
            httponly=True,
            samesite="strict",
            secure=settings.ui_secure_cookie,
            path="/ui",
        )
        return response

    @router.post("/login")
    async def login(request: Request, state: StateDep) -> Response:
        form = await request.form()
        key, csrf, next_url = (str(form.get(n, "")).strip() for n in ("key", CSRF_FIELD, "next"))
        if not _origin_ok(request) or not tokens_match(request.cookies.get(LOGIN_COOKIE, ""), csrf or None):
            raise UiRefused("the sign-in form's CSRF token is missing or wrong: reload the page")
        service = get_graph_service(state)
        try:
            found = await _in_thread(lambda: service.key_for_token(key))
        except InvalidApiKeyError:
            return _login(request, next_url, "That key is not valid (unknown or revoked).", 401)
        except GraphUnavailableError as e:
            raise ServiceUnavailableError(str(e)) from e
        session = sessions.create(key)
        logger.info("ui sign-in", extra={"actor": found.name, "role": found.role.value})
        response = _see(_safe_next(next_url))
        response.set_cookie(
            SESSION_COOKIE,
            session.id,
            httponly=True,
            samesite="strict",
            secure=settings.ui_secure_cookie,
            path="/ui",
        )
        response.delete_cookie(LOGIN_COOKIE, path="/ui")
        return response

    @router.post("/logout")
    def logout(visit: WriteDep) -> RedirectResponse:
        sessions.end(visit.session.id)
        response = _see("/ui/login?message=Signed+out.")
        response.delete_cookie(SESSION_COOKIE, path="/ui")
        return response

    # -- review queue ---------------------------------------------------------------------------------

    def _queue_filter(params: dict[str, str]) -> tuple[ReviewQueueFilter, str]:
        """The filter of the queue's parameters, and an error message for a bad one (then ignored)."""
        try:
            min_speedup = float(params["min_speedup"]) if params.get("min_speedup") else None
            error = ""
        except ValueError:
            min_speedup = None
            error = f"min speedup {params['min_speedup']!r} is not a number"
        only = ReviewQueueFilter(
            technique=params["technique"] or None,
            transition=params["transition"] or None,
            task=params["task"] or None,
            device=params["device"] or None,
            min_speedup=min_speedup,
        )
        return only, error

    def _queue_context(
        visit: Visit,
        params: dict[str, str],
        only: ReviewQueueFilter,
        selected: str | None,
        page: ReviewQueuePage,
    ) -> dict[str, Any]:
        pending = page.pending
        shown = [e for e in pending if only.keeps(e)]
        current = next((e for e in shown if e.id == selected), shown[0] if shown else None)
        index = shown.index(current) if current is not None else -1
        return {
            "params": params,
            "back": urlencode({k: v for k, v in params.items() if v}),
            "examples": shown,
            "total_pending": len(pending),
            "capped": len(pending) >= QUEUE_LIMIT,
            "facets": {
                "technique": sorted({n for e in pending for n in (e.source, e.target)}),
                "transition": sorted({f"{e.source} -> {e.target}" for e in pending}),
                "task": sorted({e.task_id for e in pending}),
                "device": sorted({e.device for e in pending if e.device}),
            },
            "current": current,
            "prev_id": shown[index - 1].id if index > 0 else None,
            "next_id": shown[index + 1].id if 0 <= index < len(shown) - 1 else None,
            "detail": _shown_detail(visit, current, page),
        }

    def _shown_detail(
        visit: Visit, current: ExampleSummary | None, page: ReviewQueuePage
    ) -> dict[str, Any] | None:
        if current is None:
            return None
        if page.example is None or page.example.id != current.id:
            # The page query and `ReviewQueueFilter.keeps` chose differently: a bug, but the page still
            # shows the example the list says is current (read on its own).
            logger.warning("review queue: the page query showed another example than the list's current")
            try:
                return _example_context(visit, visit.service.get_example(current.id), page.pending)
            except GraphServiceError as e:
                visit.flash("error", str(e))
                return None
        transition = TransitionPublic.of(page.transition) if page.transition is not None else None
        return _example_detail(ExamplePublic.of(page.example), page.pending, transition, page.technique_names)

    def _example_context(
        visit: Visit, example: ExamplePublic, nearby: Sequence[ExamplePublic | ExampleSummary]
    ) -> dict[str, Any]:
        """An example's detail with its transition and the technique names read separately."""
        service = visit.service
        try:
            transition: TransitionPublic | None = service.list_transitions(
                source=example.source, target=example.target, limit=1, offset=0
            ).items[0]
        except GraphServiceError:
            transition = None
        return _example_detail(example, nearby, transition, _technique_names(service))

    def _example_detail(
        example: ExamplePublic,
        nearby: Sequence[ExamplePublic | ExampleSummary],
        transition: TransitionPublic | None,
        technique_names: list[str],
    ) -> dict[str, Any]:
        # The example's trajectory, as far as its steps are in view: its place on the technique path.
        steps = sorted(
            (e for e in nearby if example.trajectory_id and e.trajectory_id == example.trajectory_id),
            key=lambda e: e.step_index if e.step_index is not None else -1,
        )
        return {
            "example": example,
            "rows": side_by_side(example.code_before, example.code_after),
            "transition": transition,
            "steps": steps,
            "techniques": technique_names,
        }

    @router.get("/queue")
    async def queue(
        request: Request,
        state: StateDep,
        technique: str = "",
        transition: str = "",
        task: str = "",
        device: str = "",
        min_speedup: str = "",
        selected: str | None = None,
    ) -> HTMLResponse:
        # Not a `VisitDep`: the key is checked in the page's own query (one round trip, not two).
        session, target = _live_session(request)
        service = get_graph_service(state)
        params = {
            "technique": technique,
            "transition": transition,
            "task": task,
            "device": device,
            "min_speedup": min_speedup,
        }
        only, error = _queue_filter(params)
        try:
            page = await _in_thread(
                lambda: service.review_queue_page(
                    session.token, limit=QUEUE_LIMIT, selected=selected, only=only
                )
            )
        except InvalidApiKeyError as e:
            raise _key_refused(request, session, target, e) from e
        except GraphUnavailableError as e:
            raise ServiceUnavailableError(str(e)) from e
        caller = Caller(name=page.key.name, role=page.key.role, key_id=page.key.id)
        visit = Visit(request, session, caller, service, state.settings, state.jobs)
        if error:
            visit.flash("error", error)
        context = await _in_thread(lambda: _queue_context(visit, params, only, selected, page))
        return visit.render("queue.html", nav="queue", **context)

    @router.get("/examples/{example_id}")
    async def example_page(visit: VisitDep, example_id: str) -> Response:
        def load() -> dict[str, Any] | None:
            with visit.reported():
                example = visit.service.get_example(example_id)
                return _example_context(visit, example, [])
            return None

        detail = await _in_thread(load)
        if detail is None:
            return _see("/ui/queue")
        return visit.render("example.html", nav="queue", detail=detail, back="")

    def _after_review(visit: Visit, next_id: str) -> RedirectResponse:
        back = visit.field("back")
        query = back + (f"&selected={next_id}" if next_id else "")
        return _see(f"/ui/queue?{query.lstrip('&')}" if query else "/ui/queue")

    @router.post("/examples/{example_id}/review")
    async def review(visit: WriteDep, example_id: str) -> Response:
        visit.require(Role.CURATOR)
        decision, reason = visit.field("decision"), visit.field("reason")
        if decision not in ("approve", "reject"):
            visit.flash("error", "choose approve or reject")
        elif decision == "reject" and not reason:
            visit.flash("error", "a rejection needs a reason")
            return _after_review(visit, example_id)
        elif decision == "reject" and (
            asked := _confirm(
                visit,
                "Reject",
                f"Reject example {example_id[:12]} ({reason!r}): it leaves retrieval and its transition's "
                "statistics (1 example).",
                f"/ui/queue?selected={example_id}",
            )
        ):
            return asked
        else:
            body = ReviewRequest(decision=decision, reason=reason)
            with visit.reported(
                f"{'Approved' if decision == 'approve' else 'Rejected'} example {example_id[:12]}."
            ):
                await _in_thread(
                    lambda: visit.service.review_example(example_id, body, actor=visit.caller.name)
                )
        return _after_review(visit, visit.field("next_id"))

    @router.post("/examples/{example_id}/split")
    async def split(visit: WriteDep, example_id: str) -> RedirectResponse:
        visit.require(Role.CURATOR)
        target, source = visit.field("target"), visit.field("source")
        try:
            body = SplitRequest(target=target, source=source or None)
        except ValidationError:
            visit.flash("error", "name the technique to split the example onto")
            return _after_review(visit, example_id)
        with visit.reported(
            f"Moved example {example_id[:12]} onto {body.source or 'its source'} -> {target}."
        ):
            await _in_thread(lambda: visit.service.split_example(example_id, body, actor=visit.caller.name))
        return _after_review(visit, visit.field("next_id"))

    # -- techniques and transitions -------------------------------------------------------------------

    @router.get("/techniques")
    async def techniques(visit: VisitDep, q: str = "") -> HTMLResponse:
        def load() -> dict[str, Any]:
            items = []
            offset = 0
            while True:
                page = visit.service.list_techniques(PAGE, offset).items
                items.extend(page)
                if len(page) < PAGE:
                    break
                offset += PAGE
            links = visit.service.technique_links()
            out_n = Counter({n: k.out_n for n, k in links.items()})
            in_n = Counter({n: k.in_n for n, k in links.items()})
            examples = Counter({n: k.examples_in for n, k in links.items()})
            needle = q.lower()
            shown = [
                t
                for t in items
                if not needle or needle in t.name.lower() or any(needle in a.lower() for a in t.aliases)
            ]
            return {"items": shown, "out_n": out_n, "in_n": in_n, "examples": examples, "q": q}

        return visit.render("techniques.html", nav="techniques", **await _in_thread(load))

    @router.get("/technique")
    async def technique(visit: VisitDep, name: str) -> Response:
        def load() -> dict[str, Any] | None:
            service = visit.service
            with visit.reported():
                found = service.get_technique(name)
                transitions = service.transitions_of(found.name)
                into = sorted(
                    (t for t in transitions if t.target == found.name),
                    key=lambda t: (-t.stats.n_examples, t.source),
                )
                out = sorted(
                    (t for t in transitions if t.source == found.name),
                    key=lambda t: (-t.stats.n_examples, t.target),
                )
                best = service.best_examples_into(found.name, BEST_SHOWN)
                return {
                    "technique": found,
                    "predecessors": into,
                    "successors": out,
                    "best": best,
                    "names": [n for n in _technique_names(service) if n != found.name],
                }
            return None

        context = await _in_thread(load)
        if context is None:
            return _see("/ui/techniques")
        return visit.render("technique.html", nav="techniques", **context)

    @router.post("/technique/edit")
    async def edit_technique(visit: WriteDep) -> RedirectResponse:
        visit.require(Role.CURATOR)
        name, new_name, description = visit.field("name"), visit.field("new_name"), visit.field("description")
        try:
            body = TechniqueUpdate(name=new_name or None, description=description)
        except ValidationError as e:
            visit.flash("error", str(e.errors()[0]["msg"]))
            return _see(f"/ui/technique?{urlencode({'name': name})}")
        landed = name
        with visit.reported("Saved."):
            landed = (
                await _in_thread(lambda: visit.service.update_technique(name, body, actor=visit.caller.name))
            ).name
        return _see(f"/ui/technique?{urlencode({'name': landed})}")

    @router.post("/technique/merge")
    async def merge_technique(visit: WriteDep) -> Response:
        visit.require(Role.CURATOR)
        source, into = visit.field("source"), visit.field("into")
        try:
            body = MergeRequest(source=source, into=into)
        except ValidationError:
            visit.flash("error", "name both techniques to merge")
            return _see(f"/ui/technique?{urlencode({'name': source})}")
        moves = await _in_thread(lambda: _what_moves(visit.service, source))
        asked = _confirm(
            visit,
            "Merge",
            f"Merge {source!r} into {into!r}: {moves} move to {into!r}; {source!r} and its aliases "
            f"become aliases of {into!r}.",
            f"/ui/technique?{urlencode({'name': source})}",
            undo_note=UNDO_NOTE,
        )
        if asked is not None:
            return asked
        landed = source
        with visit.reported(f"Merged {source!r} into {into!r}; its names are now aliases."):
            landed = (
                await _in_thread(lambda: visit.service.merge_techniques(body, actor=visit.caller.name))
            ).name
        return _see(f"/ui/technique?{urlencode({'name': landed})}")

    @router.get("/transition")
    async def transition(visit: VisitDep, source: str, target: str) -> Response:
        def load() -> dict[str, Any] | None:
            with visit.reported():
                found = visit.service.list_transitions(source=source, target=target, limit=1, offset=0).items[
                    0
                ]
                examples = visit.service.list_examples(
                    source=source, target=target, status=None, limit=200, offset=0
                ).items
                return {"transition": found, "examples": examples}
            return None

        context = await _in_thread(load)
        if context is None:
            return _see("/ui/graph")
        return visit.render("transition.html", nav="graph", **context)

    # -- the graph ------------------------------------------------------------------------------------

    @router.get("/graph")
    def graph_page(visit: VisitDep) -> HTMLResponse:
        return visit.render("graph.html", nav="graph")

    @router.get("/graph/data")
    async def graph_data(visit: VisitDep) -> JSONResponse:
        def load() -> dict[str, Any]:
            names = _technique_names(visit.service)
            # Past a few thousand edges a browser drawing them all stops being usable: the thinnest go.
            transitions = visit.service.busiest_transitions(GRAPH_EDGE_LIMIT)
            total = visit.service.store.counts()["transitions"]
            degree = Counter[str]()
            for t in transitions:
                degree[t.source] += t.stats.n_examples
                degree[t.target] += t.stats.n_examples
            top = max((t.stats.n_examples for t in transitions), default=1) or 1
            linked = {t.source for t in transitions} | {t.target for t in transitions}
            return {
                "initial": INITIAL_TECHNIQUE,
                "transitions_total": total,
                "nodes": [{"data": {"id": n, "weight": degree[n]}} for n in names if n in linked],
                # Drawn apart (a collapsed list), not in the layered layout: they have no place in it.
                "unlinked": [n for n in names if n not in linked],
                "edges": [
                    {
                        "data": {
                            "id": t.key,
                            "source": t.source,
                            "target": t.target,
                            "examples": t.stats.n_examples,
                            "verified": t.stats.n_verified,
                            "rejected": t.stats.n_rejected,
                            "success": t.stats.success_rate,
                            "median": t.stats.median_speedup if t.stats.n_verified else None,
                            "speedup": t.stats.mean_speedup if t.stats.n_verified else None,
                            "label": f"{t.stats.n_examples} ex · {fmt_speedup(t.stats.mean_speedup if t.stats.n_verified else None)}",
                            "width": 1 + 7 * (t.stats.n_examples / top) ** 0.5,
                            "colour": speedup_colour(t.stats.mean_speedup if t.stats.n_verified else None),
                        }
                    }
                    for t in transitions
                ],
            }

        return JSONResponse(await _in_thread(load))

    @router.get("/graph/examples")
    async def graph_examples(visit: VisitDep, source: str, target: str) -> JSONResponse:
        """A transition's best examples for the graph's side panel: the fastest verified first."""

        def load() -> list[dict[str, Any]]:
            found = visit.service.list_examples(
                source=source, target=target, status=None, limit=200, offset=0
            )
            best = sorted(found.items, key=lambda e: (e.speedup is None, -(e.speedup or 0.0)))
            return [
                {
                    "id": e.id,
                    "task": e.task_id,
                    "speedup": fmt_speedup(e.speedup),
                    "status": e.review_status.value,
                }
                for e in best[:GRAPH_TOP_EXAMPLES]
            ]

        try:
            return JSONResponse(await _in_thread(load))
        except GraphServiceError as e:
            return JSONResponse(
                {"error": str(e)}, status_code=503 if isinstance(e, GraphUnavailableError) else 404
            )

    # -- Cypher ---------------------------------------------------------------------------------------

    @router.get("/cypher")
    def cypher_page(visit: VisitDep, example: int | None = None) -> HTMLResponse:
        chosen = examples_doc[example] if example is not None and 0 <= example < len(examples_doc) else None
        return visit.render(
            "cypher.html",
            nav="cypher",
            examples=examples_doc,
            query=chosen["query"]
            if chosen
            else "MATCH (t:Technique) RETURN t.name AS name ORDER BY name LIMIT 25",
            parameters=chosen["parameters"] if chosen else "{}",
            result=None,
            error=None,
        )

    @router.post("/cypher")
    async def cypher_run(visit: WriteDep, state: StateDep) -> HTMLResponse:
        query, parameters = visit.field("query"), visit.field("parameters") or "{}"
        result = None
        error: dict[str, Any] | None = None
        try:
            body = CypherRequest(query=query, parameters=json.loads(parameters))
        except (ValueError, ValidationError) as e:
            error = {"type": "invalid_request", "message": f"the query or its parameters are not valid: {e}"}
        else:
            try:  # the same slots as /v1/cypher and the MCP tool (api/limits.py)
                result = await run_reader_cypher(
                    state,
                    visit.caller.key_id or ANONYMOUS,
                    body,
                    disconnected=visit.request.is_disconnected,
                )
            except (QueryRefusedError, QueryFailedError, GraphUnavailableError, LimitError) as e:
                api = cypher_api_error(e)
                error = {"type": api.error_type, "status": api.status_code, "message": api.message}
        if result is not None:  # the console shows nodes without their embedding vectors
            result = result.model_copy(update={"rows": [without_vectors(row) for row in result.rows]})
        return visit.render(
            "cypher.html",
            nav="cypher",
            examples=examples_doc,
            query=query,
            parameters=parameters,
            result=result,
            error=error,
        )

    # -- optimization jobs ----------------------------------------------------------------------------

    def _jobs(visit: Visit) -> JobService:
        if visit.jobs is None:
            raise ServiceUnavailableError("the job service is starting or stopping")
        return visit.jobs

    @router.get("/jobs")
    async def jobs_page(visit: VisitDep) -> HTMLResponse:
        records = await _jobs(visit).list_jobs(limit=50, owner=visit.caller.job_scope)
        return visit.render(
            "jobs.html", nav="jobs", jobs=[JobPublic.of(r) for r in records], tasks=task_ids, methods=METHODS
        )

    @router.post("/jobs")
    async def start_job(visit: WriteDep) -> RedirectResponse:
        # Like POST /v1/optimize: any signed-in key may run a job (it changes nothing in the graph).
        fields = {"task_ref": visit.field("task"), "method": visit.field("method") or "regraph-mcgs"}
        numbers = {k: visit.field(k) for k in ("budget", "rollouts", "seed") if visit.field(k)}
        try:
            body = OptimizeCreate.model_validate({**fields, **{k: int(v) for k, v in numbers.items()}})
        except (ValueError, ValidationError) as e:
            visit.flash("error", f"the job request is not valid: {e}")
            return _see("/ui/jobs")
        try:
            record = await _jobs(visit).submit(body, owner=visit.caller.job_owner)
        except OptimizeError as e:
            visit.flash("error", optimize_api_error(e).message)
            return _see("/ui/jobs")
        logger.info("ui job started", extra={"actor": visit.caller.name, "job": record.id})
        return _see(f"/ui/jobs/{record.id}")

    @router.get("/jobs/{job_id}")
    async def job_page(visit: VisitDep, job_id: str) -> Response:
        try:
            job = JobPublic.of(await _jobs(visit).get(job_id, owner=visit.caller.job_scope))
        except OptimizeError as e:
            visit.flash("error", optimize_api_error(e).message)
            return _see("/ui/jobs")
        budget = int(job.request.get("budget", 20))
        return visit.render("job.html", nav="jobs", job=job, budget=budget)

    @router.get("/jobs/{job_id}/events")
    async def job_events(visit: VisitDep, job_id: str, after: Annotated[int, Query(ge=-1)] = -1) -> Response:
        try:
            await _jobs(visit).get(job_id, owner=visit.caller.job_scope)
            return await event_stream_response(_jobs(visit), job_id, after)
        except OptimizeError as e:
            api = optimize_api_error(e)
            return Response(api.message, status_code=api.status_code, media_type="text/plain")

    @router.post("/jobs/{job_id}/cancel")
    async def cancel_job(visit: WriteDep, job_id: str) -> RedirectResponse:
        with visit.reported("Cancelled."):
            await _jobs(visit).cancel(job_id, owner=visit.caller.job_scope)
        return _see(f"/ui/jobs/{job_id}")

    # -- relabel decisions ----------------------------------------------------------------------------

    @router.get("/relabel")
    async def relabel(visit: VisitDep, outcome: str = "", include_undone: bool = False) -> HTMLResponse:
        chosen = RelabelOutcome(outcome) if outcome in {o.value for o in RelabelOutcome} else None
        decisions = await _in_thread(
            lambda: (
                visit.service.list_decisions(
                    outcome=chosen, include_undone=include_undone, limit=PAGE, offset=0
                ).items
            )
        )
        return visit.render(
            "relabel.html",
            nav="relabel",
            decisions=decisions,
            outcome=outcome,
            outcomes=[o.value for o in RelabelOutcome],
            include_undone=include_undone,
        )

    @router.post("/relabel/{decision_id}/undo")
    async def undo(visit: WriteDep, decision_id: str) -> RedirectResponse:
        visit.require(Role.CURATOR)
        with visit.reported("Decision undone."):
            await _in_thread(lambda: visit.service.undo_decision(decision_id, actor=visit.caller.name))
        return _see("/ui/relabel")

    # -- the relabel queue and likely duplicates -------------------------------------------------------

    @router.get("/relabel-queue")
    async def relabel_queue(visit: VisitDep, relabel: RelabelServiceDep) -> HTMLResponse:
        def load() -> dict[str, Any]:
            queue = relabel.list_queue(limit=QUEUED_SHOWN, offset=0)
            # The merge field starts on the most probable technique other than the one it is on now.
            suggested = {
                item.id: next((c.technique for c in item.candidates if c.technique != item.technique), "")
                for item in queue.items
            }
            names = [n for n in _technique_names(visit.service) if n != INITIAL_TECHNIQUE]
            return {"queue": queue, "suggested": suggested, "names": names}

        context: dict[str, Any] = {"queue": QueueList(items=[], total=0, limit=0, offset=0)}
        with visit.reported():
            context = await _in_thread(load)
        context.setdefault("suggested", {})
        context.setdefault("names", [])
        return visit.render("relabel_queue.html", nav="relabel-queue", **context)

    @router.post("/relabel-queue/{decision_id}/accept")
    async def accept_queued(
        visit: WriteDep, relabel: RelabelServiceDep, decision_id: str
    ) -> RedirectResponse:
        visit.require(Role.CURATOR)
        with visit.reported():
            done = await _in_thread(lambda: relabel.resolve(decision_id, into=None, actor=visit.caller.name))
            visit.flash("ok", f"Accepted {done.candidate!r} on {done.technique!r}.")
        return _see("/ui/relabel-queue")

    @router.post("/relabel-queue/{decision_id}/merge")
    async def merge_queued(visit: WriteDep, relabel: RelabelServiceDep, decision_id: str) -> Response:
        visit.require(Role.CURATOR)
        try:
            body = QueueMerge(into=visit.field("into"))
        except ValidationError:
            visit.flash("error", "name the technique to merge the name into")
            return _see("/ui/relabel-queue")
        asked = _confirm(
            visit,
            "Merge",
            f"Merge the queued name of decision {decision_id[:12]} into {body.into!r}: the examples "
            f"written under that name move to {body.into!r} and the name becomes one of its aliases.",
            "/ui/relabel-queue",
        )
        if asked is not None:
            return asked
        with visit.reported():
            done = await _in_thread(
                lambda: relabel.resolve(decision_id, into=body.into, actor=visit.caller.name)
            )
            visit.flash("ok", f"Merged {done.candidate!r} into {done.technique!r}.")
        return _see("/ui/relabel-queue")

    @router.get("/duplicates")
    async def duplicates(
        visit: VisitDep, relabel: RelabelServiceDep, min_probability: str = "0.5"
    ) -> HTMLResponse:
        try:
            least = float(min_probability)
            if not 0.0 <= least <= 1.0:
                raise ValueError(min_probability)
        except ValueError:
            visit.flash(
                "error", f"the least probability must be a number from 0 to 1, not {min_probability!r}"
            )
            least = 0.5

        def load() -> dict[str, Any]:
            return {
                "duplicates": relabel.likely_duplicates(min_probability=least, limit=DUPLICATES_SHOWN),
                "kept": relabel.list_kept_separate(),
            }

        context: dict[str, Any] = {
            "duplicates": DuplicateList(items=[], techniques=0),
            "kept": KeptSeparateList(items=[]),
        }
        with visit.reported():
            context = await _in_thread(load)
        return visit.render("duplicates.html", nav="duplicates", min_probability=least, **context)

    def _pair(visit: Visit, first: str, second: str) -> PairReview | None:
        try:
            return PairReview(first=visit.field(first), second=visit.field(second))
        except ValidationError:
            visit.flash("error", "name both techniques of the pair")
            return None

    @router.post("/duplicates/merge")
    async def merge_duplicates(visit: WriteDep, relabel: RelabelServiceDep) -> Response:
        visit.require(Role.CURATOR)
        pair = _pair(visit, "keep", "merge")
        if pair is not None:
            body = DuplicateMerge(keep=pair.first, merge=pair.second)
            moves = await _in_thread(lambda: _what_moves(visit.service, body.merge))
            asked = _confirm(
                visit,
                "Merge",
                f"Merge {body.merge!r} into {body.keep!r}: {moves} move to {body.keep!r}; "
                f"{body.merge!r} and its aliases become aliases of {body.keep!r}.",
                "/ui/duplicates",
                undo_note=UNDO_NOTE,
            )
            if asked is not None:
                return asked
            with visit.reported(f"Merged {body.merge!r} into {body.keep!r}; its names are now aliases."):
                await _in_thread(lambda: relabel.merge(body, actor=visit.caller.name))
        return _see("/ui/duplicates")

    @router.post("/duplicates/keep-separate")
    async def keep_separate(visit: WriteDep, relabel: RelabelServiceDep) -> RedirectResponse:
        visit.require(Role.CURATOR)
        pair = _pair(visit, "first", "second")
        if pair is not None:
            with visit.reported(f"Kept {pair.first!r} and {pair.second!r} separate."):
                await _in_thread(lambda: relabel.keep_separate(pair, actor=visit.caller.name))
        return _see("/ui/duplicates")

    @router.post("/duplicates/kept-separate/undo")
    async def undo_keep_separate(visit: WriteDep, relabel: RelabelServiceDep) -> RedirectResponse:
        visit.require(Role.CURATOR)
        pair = _pair(visit, "first", "second")
        if pair is not None:
            with visit.reported(f"{pair.first!r} and {pair.second!r} may be listed as duplicates again."):
                await _in_thread(lambda: relabel.undo_keep_separate(pair, actor=visit.caller.name))
        return _see("/ui/duplicates")

    # -- audit ----------------------------------------------------------------------------------------

    @router.get("/audit")
    async def audit(
        visit: VisitDep, actor: str = "", action: str = "", target: str = "", since: str = "", until: str = ""
    ) -> HTMLResponse:
        entries = await _in_thread(
            lambda: visit.service.list_audit(target=target or None, limit=PAGE, offset=0).items
        )
        actors = sorted({e.actor for e in entries})
        actions = sorted({e.action for e in entries})
        shown = [
            e
            for e in entries
            if (not actor or e.actor == actor)
            and (not action or e.action == action)
            and (not since or e.at.isoformat() >= since)
            and (not until or e.at.isoformat()[: len(until)] <= until)
        ]
        undone = {e.target.removeprefix("audit:") for e in entries if e.action == "technique.merge.undo"}
        return visit.render(
            "audit.html",
            nav="audit",
            entries=shown,
            undone=undone,
            # What a merge records for its undo (a whole technique, every moved example) stays off the page.
            details={e.id: {k: v for k, v in e.details.items() if k != "undo"} for e in shown},
            actors=actors,
            actions=actions,
            params={"actor": actor, "action": action, "target": target, "since": since, "until": until},
        )

    @router.post("/audit/{audit_id}/undo")
    async def undo_merge(visit: WriteDep, audit_id: str) -> RedirectResponse:
        visit.require(Role.CURATOR)
        with visit.reported():
            done = await _in_thread(lambda: visit.service.undo_merge(audit_id, actor=visit.caller.name))
            visit.flash(
                "ok", f"Merge undone: {done.details.get('merged')!r} is a technique again, as it was."
            )
        return _see("/ui/audit")

    # -- administration -------------------------------------------------------------------------------

    @router.get("/admin")
    async def admin(visit: VisitDep) -> HTMLResponse:
        visit.require(Role.ADMIN)
        keys = await _in_thread(visit.service.list_keys)
        counts = await _in_thread(lambda: visit.service.store.counts())
        return visit.render(
            "admin.html", nav="admin", keys=keys, created=None, counts=counts, roles=list(Role)
        )

    @router.get("/admin/export")
    async def export(visit: VisitDep) -> Response:
        visit.require(Role.ADMIN)
        exported = await _in_thread(visit.service.export_graph)
        return Response(
            exported.model_dump_json(),
            media_type="application/json",
            headers={"Content-Disposition": 'attachment; filename="regraph-graph.json"'},
        )

    @router.post("/admin/import")
    async def import_graph(visit: WriteDep) -> RedirectResponse:
        visit.require(Role.ADMIN)
        upload = visit.form.get("file") if visit.form is not None else None
        if not isinstance(upload, UploadFile):
            visit.flash("error", "choose an export file to import")
            return _see("/ui/admin")
        # The form's file was spooled to disk as it arrived; the edge allows an admin's import
        # REGRAPH_MAX_IMPORT_BYTES and answers a page saying so past it.
        raw = await upload.read()
        if not raw.strip():  # a form sent without a file carries an empty one
            visit.flash("error", "no file was chosen (or it is empty): choose an export file to import")
            return _see("/ui/admin")
        with visit.reported():
            summary = await _in_thread(lambda: visit.service.import_upload(raw, actor=visit.caller.name))
            ignored = (
                f" The file's {summary.api_keys_ignored} API key(s) were ignored: keys are never imported."
                if summary.api_keys_ignored
                else ""
            )
            visit.flash(
                "ok", f"Imported {summary.techniques} techniques and {summary.examples} examples.{ignored}"
            )
        return _see("/ui/admin")

    @router.post("/admin/keys")
    async def create_key(visit: WriteDep) -> Response:
        visit.require(Role.ADMIN)
        try:
            body = ApiKeyCreate(name=visit.field("name"), role=Role(visit.field("role")))
        except (ValueError, ValidationError):
            visit.flash("error", "a key needs a name (letters, digits, . _ @ -) and a role")
            return _see("/ui/admin")
        created = None
        with visit.reported():
            created = await _in_thread(lambda: visit.service.create_key(body, actor=visit.caller.name))
        if created is None:
            return _see("/ui/admin")
        keys = await _in_thread(visit.service.list_keys)
        counts = await _in_thread(lambda: visit.service.store.counts())
        # Rendered, not redirected: the token is shown this once and never stored anywhere.
        return visit.render(
            "admin.html", nav="admin", keys=keys, created=created, counts=counts, roles=list(Role)
        )

    @router.post("/admin/keys/{key_id}/revoke")
    async def revoke_key(visit: WriteDep, key_id: str) -> RedirectResponse:
        visit.require(Role.ADMIN)
        with visit.reported("Key revoked."):
            await _in_thread(lambda: visit.service.revoke_key(key_id, actor=visit.caller.name))
        return _see("/ui/admin")

    return router


def mount(app: FastAPI, settings: ApiSettings) -> None:
    """Serve the curation workspace under /ui on `app`."""
    sessions = SessionStore(settings.ui_session_ttl_s)
    app.state.ui_sessions = sessions
    app.include_router(build_router(sessions, settings))
    missing = [name for name, path in ui_assets(settings.ui_vendor_dir).items() if not path.is_file()]
    if missing:
        logger.warning("ui assets missing (run scripts/bootstrap.sh)", extra={"assets": ",".join(missing)})

    async def sign_in(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, SignInRequired)
        query = urlencode({"next": exc.next_url, **({"message": exc.message} if exc.message else {})})
        if request.headers.get("hx-request"):
            # htmx follows redirects inside the page; this header sends the whole browser instead.
            return Response(status_code=204, headers={"HX-Redirect": f"/ui/login?{query}"})
        return _see(f"/ui/login?{query}")

    async def refused(request: Request, exc: Exception) -> Response:
        return templates.TemplateResponse(
            request, "refused.html", {"message": str(exc), "caller": None}, status_code=403
        )

    app.add_exception_handler(SignInRequired, sign_in)
    app.add_exception_handler(UiRefused, refused)
