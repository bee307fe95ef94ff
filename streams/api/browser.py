"""The memory browser: a static app under `/ui/` (streams/api/ui/, no build step, nothing
fetched from elsewhere) that reads the JSON API with the key its user pastes.

The files are public, as a login page is: they hold no data, and every request the app makes
carries the key. Only the files of `UI_FILES` are served, read once at start, so that no
request path can reach anything else.
"""

from __future__ import annotations

from pathlib import Path

from faust.web import Request, Response, View

from processors.api.openapi import Raw
from processors.api.parameters import opaque
from streams.api.pages import Pages
from streams.api.params import NO_PARAMS, Param

UI_DIR = Path(__file__).with_name("ui")
UI_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
# The app's own files and the API are all it may load or call; data is never run as code.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                               "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


def wire_browser(pages: Pages) -> None:
    files = {name: (UI_DIR / name).read_bytes() for name in UI_FILES}

    def serve(web: View, name: str) -> Response:
        if name not in files:
            return web.json({"error": "not found"}, status=404)
        # In the headers: aiohttp's content_type argument refuses a charset.
        return web.bytes(files[name], headers={"Content-Type": UI_FILES[name], **HEADERS})

    @pages.page("/ui", public=True, params=NO_PARAMS, answer=Raw((), status=308))
    async def ui_root(web: View, request: Request) -> Response:
        """Redirects to the browser's page."""
        # The app's files are named relative to /ui/.
        return web.text("", status=308, headers={"Location": "/ui/"})

    @pages.page("/ui/", public=True, params=NO_PARAMS, answer=Raw(("text/html",)))
    async def ui_index(web: View, request: Request) -> Response:
        """The memory browser's page."""
        return serve(web, "index.html")

    # Any name: it only picks one of the files, and any other is 404.
    @pages.page("/ui/{name}", public=True, params={
        "name": Param(opaque(str, "the name of one of the browser's files"))},
        answer=Raw(tuple(sorted({kind.split(";")[0] for kind in UI_FILES.values()}))))
    async def ui_file(web: View, request: Request, name: str) -> Response:
        """One of the memory browser's files: its page, script or style sheet."""
        return serve(web, name)

