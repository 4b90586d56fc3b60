"""The interactive API documentation (`/docs`), served whole by this process.

FastAPI's default page loads Swagger UI from a CDN and renders nothing offline (issue 15). Here the
page's script, style sheet and icon come from the `swagger-ui-py` package's copy of Swagger UI,
served under `/docs/assets`, so the documentation works on a machine without internet access.
ReDoc (also CDN-only in FastAPI) is not served.
"""

from __future__ import annotations

from pathlib import Path

import swagger_ui
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

SWAGGER_UI_ASSETS = Path(swagger_ui.__file__).resolve().parent / "static"
DOCS_PATH = "/docs"
ASSETS_PATH = f"{DOCS_PATH}/assets"


def mount_docs(app: FastAPI) -> None:
    """Serve Swagger UI for `app`'s OpenAPI document at `/docs` with its assets from the package
    (the app is built with `docs_url=None, redoc_url=None`)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=SWAGGER_UI_ASSETS), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get(DOCS_PATH, include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - API documentation",
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon-32x32.png",
        )
