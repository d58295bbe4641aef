"""/docs: Swagger UI over /openapi.json, its script and style served by this app from the files
the `swagger-ui-py` package ships, never from a CDN (a server without the Internet, or a
browser that may reach only it, still shows its API).

FastAPI's recipe for self-hosting the docs' static assets: `docs_url=None`, the assets mounted
as static files, and `get_swagger_ui_html` pointed at them. ReDoc, which no package ships, is
not served (`redoc_url=None`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from starlette.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"
OAUTH2_REDIRECT_PATH = "/docs/oauth2-redirect"


def swagger_ui_assets() -> Path:
    """The directory of Swagger UI's dist files inside the installed `swagger_ui` package
    (found without importing it: its `__init__` loads web-framework adapters we do not use)."""
    spec = importlib.util.find_spec("swagger_ui")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the swagger-ui-py package is missing: pip install 'recoup[api]'")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


def install(app: FastAPI) -> None:
    """Serve /docs and its assets on `app` (made with `docs_url=None, redoc_url=None`)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=swagger_ui_assets()), name="swagger-ui")
    openapi_url = app.openapi_url or "/openapi.json"
    title = f"{app.title}: API"

    @app.get(DOCS_PATH, include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=title,
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon-32x32.png",
            oauth2_redirect_url=OAUTH2_REDIRECT_PATH,
            # Swagger UI's default would show a badge fetched from validator.swagger.io.
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get(OAUTH2_REDIRECT_PATH, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()


__all__ = ["ASSETS_PATH", "DOCS_PATH", "install", "swagger_ui_assets"]
