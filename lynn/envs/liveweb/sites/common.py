"""Helpers shared by the bundled site apps: per-request SQLite connections, templates, sessions."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from lynn.envs.liveweb.sites.seed import password_hash

TEMPLATES = Path(__file__).parent / "templates"
PAGE_SIZE = 20


def templates(site: str) -> Jinja2Templates:
    """Jinja2 templates of one site (each site's folder first, shared macros after)."""
    t = Jinja2Templates(directory=[str(TEMPLATES / site), str(TEMPLATES)])
    t.env.filters["money"] = lambda v: f"${float(v):,.2f}"
    t.env.globals["qs"] = lambda params, **upd: urlencode(
        {k: v for k, v in {**params, **upd}.items() if v not in (None, "")}
    )
    return t


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """One connection per request: the env restores the file between episodes, so none is cached."""
    con = sqlite3.connect(path, timeout=10)
    con.row_factory = sqlite3.Row
    try:
        yield con
        con.commit()
    finally:
        con.close()


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def intarg(value: Any, default: int | None = None) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


def floatarg(value: Any) -> float | None:
    try:
        return float(str(value).strip().lstrip("$"))
    except (TypeError, ValueError):
        return None


def page_slice(request: Request, total: int) -> tuple[int, int, int]:
    """(page, offset, pages) for ``?page=`` with PAGE_SIZE rows per page."""
    pages = max(1, (total + PAGE_SIZE - 1) // PAGE_SIZE)
    page = min(max(1, intarg(request.query_params.get("page"), 1) or 1), pages)
    return page, (page - 1) * PAGE_SIZE, pages


def safe_next(target: object, default: str) -> str:
    """A post-login redirect target on this same site: a path, never ``//host`` or a full URL."""
    path = str(target or "")
    if path.startswith("/") and not path.startswith("//") and "\\" not in path:
        return path
    return default


def login_view(
    db: Path,
    render: Callable[..., Response],
    query: str,
    session_key: str,
    session_column: str,
    default_next: str = "/",
) -> Callable[[Request], Awaitable[Response]]:
    """The ``/login`` handler every site shares (GET shows the form; POST checks the password).

    Args:
        db: the site database.
        render: the site's template renderer.
        query: SQL selecting the account row; each ``?`` receives the submitted username.
        session_key: session entry set on success.
        session_column: the row column stored in it.
        default_next: where to go after login when the form names no (safe) ``next`` page.
    """

    async def login(request: Request) -> Response:
        error = None
        if request.method == "POST":
            form = await request.form()
            username = form.get("username")
            with connect(db) as con:
                row = con.execute(query, (username,) * query.count("?")).fetchone()
            if row and row["password"] == password_hash(str(form.get("password", ""))):
                request.session[session_key] = row[session_column]
                return redirect(safe_next(form.get("next"), default_next))
            error = "Invalid username or password."
        return render(request, "login.html", error=error, next=request.query_params.get("next", ""))

    return login
