"""The web dashboard: one HTML page and its script and styles, served by the app itself, with the
chart library vendored at build time (`make vendor` copies Chart.js from its npm package into
serve/static/vendor/); nothing is fetched from a CDN."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"
VENDOR = STATIC / "vendor"
CHART_JS = VENDOR / "chart.umd.min.js"


def install(app: FastAPI) -> None:
    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html",
                            headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC, check_dir=False), name="static")
