"""The bundled **forum**: subforums, posts, comments, votes, user profiles, create and edit posts."""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lynn.envs.liveweb.sites.common import connect, intarg, login_view, page_slice, redirect, templates

POST_SELECT = """SELECT p.*, u.username AS author, s.name AS subforum,
  (SELECT COALESCE(SUM(value), 0) FROM votes v WHERE v.post_id = p.id) AS score,
  (SELECT COUNT(*) FROM comments c WHERE c.post_id = p.id) AS n_comments
  FROM posts p JOIN users u ON u.id = p.user_id JOIN subforums s ON s.id = p.subforum_id"""
SORTS = {
    "new": "p.created DESC, p.id DESC",
    "top": "score DESC, p.id DESC",
    "comments": "n_comments DESC, p.id DESC",
}


def create_app(db: Path, secret: str = "lynn-forum") -> Starlette:
    """The forum app on the database file ``db``."""
    tpl = templates("forum")

    def render(request: Request, name: str, status: int = 200, **ctx: object) -> Response:
        with connect(db) as con:
            subs = con.execute("SELECT * FROM subforums ORDER BY name").fetchall()
            uid = request.session.get("uid")
            user = con.execute("SELECT * FROM users WHERE id = ?", (uid,)).fetchone() if uid else None
        return tpl.TemplateResponse(
            request, name, {"subforums": subs, "user": user, **ctx}, status_code=status
        )

    def not_found(request: Request, what: str) -> Response:
        return render(request, "message.html", 404, title="Not found", message=f"No such {what}.")

    async def home(request: Request) -> Response:
        with connect(db) as con:
            subs = con.execute(
                "SELECT s.*, (SELECT COUNT(*) FROM posts p WHERE p.subforum_id = s.id) AS n "
                "FROM subforums s ORDER BY s.name"
            ).fetchall()
            recent = con.execute(POST_SELECT + " ORDER BY p.created DESC, p.id DESC LIMIT 10").fetchall()
        return render(request, "home.html", subs=subs, recent=recent)

    async def subforum(request: Request) -> Response:
        with connect(db) as con:
            sub = con.execute(
                "SELECT * FROM subforums WHERE name = ?", (request.path_params["name"],)
            ).fetchone()
            if sub is None:
                return not_found(request, "forum")
            sort = request.query_params.get("sort")
            sort = sort if sort in SORTS else "new"
            total = con.execute("SELECT COUNT(*) FROM posts WHERE subforum_id = ?", (sub["id"],)).fetchone()[
                0
            ]
            page, offset, pages = page_slice(request, total)
            posts = con.execute(
                f"{POST_SELECT} WHERE p.subforum_id = ? ORDER BY {SORTS[sort]} LIMIT 20 OFFSET {offset}",
                (sub["id"],),
            ).fetchall()
        return render(
            request,
            "subforum.html",
            sub=sub,
            posts=posts,
            sort=sort,
            sorts=list(SORTS),
            total=total,
            page=page,
            pages=pages,
            params=dict(request.query_params),
        )

    async def post(request: Request) -> Response:
        pid = intarg(request.path_params["pid"])
        with connect(db) as con:
            p = con.execute(POST_SELECT + " WHERE p.id = ?", (pid,)).fetchone()
            comments = con.execute(
                "SELECT c.*, u.username AS author FROM comments c JOIN users u ON u.id = c.user_id "
                "WHERE c.post_id = ? ORDER BY c.created, c.id",
                (pid,),
            ).fetchall()
        if p is None:
            return not_found(request, "post")
        return render(request, "post.html", p=p, comments=comments, flash=request.query_params.get("msg"))

    def need_login(request: Request) -> Response | None:
        if not request.session.get("uid"):
            return redirect(f"/login?next={request.url.path}")
        return None

    async def vote(request: Request) -> Response:
        if r := need_login(request):
            return r
        pid = intarg(request.path_params["pid"])
        form = await request.form()
        value = 1 if form.get("dir") == "up" else -1
        with connect(db) as con:
            if con.execute("SELECT 1 FROM posts WHERE id = ?", (pid,)).fetchone() is None:
                return not_found(request, "post")
            con.execute(
                "INSERT INTO votes (post_id, user_id, value) VALUES (?, ?, ?) "
                "ON CONFLICT(post_id, user_id) DO UPDATE SET value = excluded.value",
                (pid, request.session["uid"], value),
            )
        return redirect(f"/post/{pid}?msg=Vote+recorded")

    async def comment(request: Request) -> Response:
        if r := need_login(request):
            return r
        pid = intarg(request.path_params["pid"])
        body = str((await request.form()).get("body", "")).strip()
        if not body:
            return redirect(f"/post/{pid}?msg=Comment+cannot+be+empty")
        with connect(db) as con:
            if con.execute("SELECT 1 FROM posts WHERE id = ?", (pid,)).fetchone() is None:
                return not_found(request, "post")
            con.execute(
                "INSERT INTO comments (post_id, user_id, body, created) VALUES (?, ?, ?, ?)",
                (pid, request.session["uid"], body, "2025-12-01T12:00:00"),
            )
        return redirect(f"/post/{pid}?msg=Comment+added")

    async def submit(request: Request) -> Response:
        if r := need_login(request):
            return r
        error = None
        if request.method == "POST":
            form = await request.form()
            title, body = str(form.get("title", "")).strip(), str(form.get("body", "")).strip()
            with connect(db) as con:
                sub = con.execute("SELECT * FROM subforums WHERE name = ?", (form.get("forum"),)).fetchone()
                if sub and title and body:
                    cur = con.execute(
                        "INSERT INTO posts (subforum_id, user_id, title, body, created) VALUES (?, ?, ?, ?, ?)",
                        (sub["id"], request.session["uid"], title, body, "2025-12-01T12:00:00"),
                    )
                    return redirect(f"/post/{cur.lastrowid}?msg=Post+created")
            error = "A post needs a forum, a title and a body."
        return render(request, "submit.html", error=error, forum=request.query_params.get("forum", ""))

    async def edit(request: Request) -> Response:
        if r := need_login(request):
            return r
        pid = intarg(request.path_params["pid"])
        with connect(db) as con:
            p = con.execute(POST_SELECT + " WHERE p.id = ?", (pid,)).fetchone()
            if p is None:
                return not_found(request, "post")
            if p["user_id"] != request.session["uid"]:
                return render(
                    request,
                    "message.html",
                    403,
                    title="Forbidden",
                    message="You can only edit your own posts.",
                )
            if request.method == "POST":
                form = await request.form()
                title, body = str(form.get("title", "")).strip(), str(form.get("body", "")).strip()
                if title and body:
                    con.execute("UPDATE posts SET title = ?, body = ? WHERE id = ?", (title, body, pid))
                    return redirect(f"/post/{pid}?msg=Post+updated")
        return render(request, "edit.html", p=p)

    async def profile(request: Request) -> Response:
        with connect(db) as con:
            u = con.execute(
                "SELECT * FROM users WHERE username = ?", (request.path_params["username"],)
            ).fetchone()
            if u is None:
                return not_found(request, "user")
            posts = con.execute(
                POST_SELECT + " WHERE p.user_id = ? ORDER BY p.created DESC", (u["id"],)
            ).fetchall()
            n_comments = con.execute(
                "SELECT COUNT(*) FROM comments WHERE user_id = ?", (u["id"],)
            ).fetchone()[0]
        karma = sum(p["score"] for p in posts)
        return render(request, "profile.html", u=u, posts=posts, karma=karma, n_comments=n_comments)

    async def search(request: Request) -> Response:
        q = (request.query_params.get("q") or "").strip()
        rows = []
        if q:
            with connect(db) as con:
                rows = con.execute(
                    POST_SELECT + " WHERE p.title LIKE ? ORDER BY p.created DESC LIMIT 50", (f"%{q}%",)
                ).fetchall()
        return render(request, "search.html", q=q, posts=rows)

    login = login_view(db, render, "SELECT * FROM users WHERE username = ?", "uid", "id")

    async def logout(request: Request) -> Response:
        request.session.clear()
        return redirect("/")

    routes = [
        Route("/", home),
        Route("/f/{name}", subforum),
        Route("/post/{pid}", post),
        Route("/post/{pid}/vote", vote, methods=["POST"]),
        Route("/post/{pid}/comment", comment, methods=["POST"]),
        Route("/post/{pid}/edit", edit, methods=["GET", "POST"]),
        Route("/submit", submit, methods=["GET", "POST"]),
        Route("/user/{username}", profile),
        Route("/search", search),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["GET", "POST"]),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(SessionMiddleware, secret_key=secret, session_cookie="lynn_forum")],
    )
