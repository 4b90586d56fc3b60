"""The shell of the curation workspace: it assembles every feature's pages under ``/ui`` and serves
what no feature owns (the assets, sign-in and sign-out, the answers to a missing session or a refused
write).

The pages themselves live with their features, one ``ui.py`` each (techniques, examples, relabel,
optimize, cypher, audit, keys, transfer); `FEATURES` lists them in the order they are mounted.
"""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import urlencode

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

import api.audit.ui
import api.cypher.ui
import api.examples.ui
import api.keys.ui
import api.optimize.ui
import api.relabel.ui
import api.techniques.ui
import api.transfer.ui
from api.deps import KeyServiceDep
from api.errors import ServiceUnavailableError
from api.graph.errors import GraphUnavailableError, InvalidApiKeyError
from api.settings import ApiSettings
from api.ui.render import highlight_css, templates
from api.ui.session import CSRF_FIELD, LOGIN_COOKIE, SESSION_COOKIE, SessionStore, tokens_match
from api.ui.visitor import (
    SignInRequired,
    UiRefused,
    WriteDep,
    in_thread,
    origin_ok,
    see,
    sessions_of,
)

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent

# Every feature's pages, in the order they are mounted (no two serve the same path).
FEATURES: tuple[APIRouter, ...] = (
    api.examples.ui.router,
    api.techniques.ui.router,
    api.cypher.ui.router,
    api.optimize.ui.router,
    api.relabel.ui.router,
    api.audit.ui.router,
    api.keys.ui.router,
    api.transfer.ui.router,
)


def ui_assets(vendor: Path) -> dict[str, Path]:
    """Every asset the pages load, by the name they load it under: our own files and the pinned npm
    packages under `vendor` (settings.ui_vendor_dir; nothing is fetched from elsewhere at run time)."""
    return {
        "ui.css": HERE / "static" / "ui.css",
        "ui.js": HERE / "static" / "ui.js",
        "htmx.min.js": vendor / "htmx.org" / "dist" / "htmx.min.js",
        "cytoscape.min.js": vendor / "cytoscape" / "dist" / "cytoscape.min.js",
    }


router = APIRouter(prefix="/ui", include_in_schema=False)


# -- assets -----------------------------------------------------------------------------------------


@router.get("/static/highlight.css")
def highlight_stylesheet() -> Response:
    return Response(highlight_css(), media_type="text/css", headers={"Cache-Control": "max-age=3600"})


@router.get("/static/{name}")
def asset(name: str, request: Request) -> Response:
    path = ui_assets(request.app.state.ui_settings.ui_vendor_dir).get(name)
    if path is None or not path.is_file():
        hint = " (run scripts/bootstrap.sh: npm ci)" if path is not None else ""
        return Response(f"no asset {name!r}{hint}", status_code=404, media_type="text/plain")
    return FileResponse(path, headers={"Cache-Control": "max-age=3600"})


# -- sign-in and sign-out ---------------------------------------------------------------------------


@router.get("", include_in_schema=False)
def home() -> RedirectResponse:
    return see("/ui/queue")


def _safe_next(url: str | None) -> str:
    # Only our own pages: an open redirect after sign-in would hand the session to anyone's link.
    if url and url.startswith("/ui") and not url.startswith("//") and "\\" not in url:
        return url
    return "/ui/queue"


def _secure_cookie(request: Request) -> bool:
    settings: ApiSettings = request.app.state.ui_settings
    return settings.ui_secure_cookie


@router.get("/login")
def login_page(request: Request, next: str = "/ui/queue", message: str = "") -> HTMLResponse:
    return _login(request, next, message)


def _login(request: Request, next_url: str, message: str, status_code: int = 200) -> HTMLResponse:
    login_token = request.cookies.get(LOGIN_COOKIE) or sessions_of(request).new_login_token()
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
        secure=_secure_cookie(request),
        path="/ui",
    )
    return response


@router.post("/login")
async def login(request: Request, keys: KeyServiceDep) -> Response:
    form = await request.form()
    key, csrf, next_url = (str(form.get(n, "")).strip() for n in ("key", CSRF_FIELD, "next"))
    if not origin_ok(request) or not tokens_match(request.cookies.get(LOGIN_COOKIE, ""), csrf or None):
        raise UiRefused("the sign-in form's CSRF token is missing or wrong: reload the page")
    try:
        found = await in_thread(lambda: keys.key_for_token(key))
    except InvalidApiKeyError:
        return _login(request, next_url, "That key is not valid (unknown or revoked).", 401)
    except GraphUnavailableError as e:
        raise ServiceUnavailableError(str(e)) from e
    session = sessions_of(request).create(key)
    logger.info("ui sign-in", extra={"actor": found.name, "role": found.role.value})
    response = see(_safe_next(next_url))
    response.set_cookie(
        SESSION_COOKIE,
        session.id,
        httponly=True,
        samesite="strict",
        secure=_secure_cookie(request),
        path="/ui",
    )
    response.delete_cookie(LOGIN_COOKIE, path="/ui")
    return response


@router.post("/logout")
def logout(visit: WriteDep) -> RedirectResponse:
    sessions_of(visit.request).end(visit.session.id)
    response = see("/ui/login?message=Signed+out.")
    response.delete_cookie(SESSION_COOKIE, path="/ui")
    return response


# -- assembly ---------------------------------------------------------------------------------------


async def _sign_in(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SignInRequired)
    query = urlencode({"next": exc.next_url, **({"message": exc.message} if exc.message else {})})
    if request.headers.get("hx-request"):
        # htmx follows redirects inside the page; this header sends the whole browser instead.
        return Response(status_code=204, headers={"HX-Redirect": f"/ui/login?{query}"})
    return see(f"/ui/login?{query}")


async def _refused(request: Request, exc: Exception) -> Response:
    return templates.TemplateResponse(
        request, "refused.html", {"message": str(exc), "caller": None}, status_code=403
    )


def mount(app: FastAPI, settings: ApiSettings) -> None:
    """Serve the curation workspace under /ui on `app`: the shell's routes, then every feature's."""
    app.state.ui_sessions = SessionStore(settings.ui_session_ttl_s)
    app.state.ui_settings = settings
    app.include_router(router)
    for feature in FEATURES:
        app.include_router(feature)
    missing = [name for name, path in ui_assets(settings.ui_vendor_dir).items() if not path.is_file()]
    if missing:
        logger.warning("ui assets missing (run scripts/bootstrap.sh)", extra={"assets": ",".join(missing)})
    app.add_exception_handler(SignInRequired, _sign_in)
    app.add_exception_handler(UiRefused, _refused)
