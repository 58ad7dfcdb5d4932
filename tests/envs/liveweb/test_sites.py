"""The bundled sites: deterministic seed data, real pages, per-instance databases restored between episodes."""

from __future__ import annotations

import hashlib
import sqlite3
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from lynn.envs.liveweb.sites.seed import build_forum, build_shop
from lynn.envs.liveweb.sites.server import SiteServer


def _dump(path: Path) -> str:
    con = sqlite3.connect(path)
    text = "\n".join(con.iterdump())
    con.close()
    return hashlib.sha256(text.encode()).hexdigest()


def test_seed_data_is_deterministic_and_large_enough(tmp_path: Path) -> None:
    for i in (1, 2):
        build_shop(tmp_path / f"shop{i}.db")
        build_forum(tmp_path / f"forum{i}.db")
    assert _dump(tmp_path / "shop1.db") == _dump(tmp_path / "shop2.db")
    assert _dump(tmp_path / "forum1.db") == _dump(tmp_path / "forum2.db")
    shop = sqlite3.connect(tmp_path / "shop1.db")
    assert shop.execute("SELECT COUNT(*) FROM products").fetchone()[0] >= 200
    assert shop.execute("SELECT COUNT(DISTINCT customer_id) FROM orders").fetchone()[0] >= 30
    assert shop.execute("SELECT COUNT(*) FROM reviews").fetchone()[0] > 0
    forum = sqlite3.connect(tmp_path / "forum1.db")
    assert forum.execute("SELECT COUNT(*) FROM posts").fetchone()[0] >= 100
    assert forum.execute("SELECT COUNT(*) FROM comments").fetchone()[0] > 0


def _get(
    url: str, data: dict | None = None, opener: urllib.request.OpenerDirector | None = None
) -> tuple[int, str]:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    try:
        resp = (opener or urllib.request.build_opener()).open(url, body, timeout=10)
        return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def server():
    srv = SiteServer()
    yield srv
    srv.close()


def test_pages_of_every_site_render(server: SiteServer) -> None:
    shop, forum, admin = server.urls["shop"], server.urls["forum"], server.urls["admin"]
    status, html = _get(shop + "/search?q=lamp&sort=price_desc&max_price=100")
    assert status == 200 and "products found" in html
    assert _get(shop + "/category/books?sort=price_asc")[0] == 200
    status, html = _get(shop + "/product/1")
    assert status == 200 and "Add to cart" in html and "Reviews" in html
    assert _get(shop + "/product/99999")[0] == 404
    status, html = _get(forum + "/f/cooking?sort=top")
    assert status == 200 and "posts" in html
    assert _get(forum + "/post/1")[0] == 200
    status, html = _get(admin + "/orders")
    assert status == 200 and "Admin login" in html  # the back office needs a login


def test_login_cart_checkout_and_restore(server: SiteServer) -> None:
    import http.cookiejar

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    shop = server.urls["shop"]
    status, html = _get(shop + "/login", {"username": "alice.anders", "password": "lynn-pass"}, opener)
    assert status == 200 and "My account" in html
    _get(shop + "/cart/add", {"product_id": "5", "qty": "2"}, opener)
    status, html = _get(shop + "/checkout", {"shipping": "express"}, opener)
    assert "has been placed" in html
    db = server.db_path("shop")
    count = "SELECT COUNT(*) FROM orders"
    before = sqlite3.connect(server.pristine / "shop.db").execute(count).fetchone()[0]
    assert sqlite3.connect(db).execute(count).fetchone()[0] == before + 1
    server.restore()  # while the server keeps running
    assert sqlite3.connect(db).execute(count).fetchone()[0] == before
    status, html = _get(shop + "/account/orders", opener=opener)
    assert status == 200 and f"Order #{before + 1}<" not in html


def test_server_restarts_on_the_same_ports_and_close_kills_it() -> None:
    srv = SiteServer(("forum",))
    try:
        urls, pid = srv.urls, srv.pid
        srv.proc.kill()
        srv.proc.wait()
        assert not srv.alive()
        srv.start()
        assert srv.urls == urls and srv.pid != pid
        pid = srv.pid
        assert _get(urls["forum"] + "/")[0] == 200
        data = srv.data
    finally:
        srv.close()
    new_pid = srv.pid
    assert not srv.alive() and new_pid is None
    assert not Path(f"/proc/{pid}").exists()
    assert not data.exists()


def test_login_redirect_stays_on_the_site() -> None:
    from lynn.envs.liveweb.sites.common import safe_next

    assert safe_next("/orders?page=2", "/") == "/orders?page=2"
    for hostile in (
        "//evil.example/x",
        "https://evil.example",
        "/\\evil.example",
        "javascript:alert(1)",
        None,
        "",
    ):
        assert safe_next(hostile, "/account") == "/account"
