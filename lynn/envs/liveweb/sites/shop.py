"""The bundled **shop**: categories, search with filters and sorting, product pages with reviews, cart,
checkout, account with order history, wishlist."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lynn.envs.liveweb.sites.common import (
    connect,
    floatarg,
    intarg,
    login_view,
    page_slice,
    redirect,
    templates,
)

SORTS = {
    "relevance": "p.id",
    "price_asc": "p.price ASC, p.id",
    "price_desc": "p.price DESC, p.id",
    "name": "p.name ASC",
    "rating": "rating DESC, p.id",
}
PRODUCT_SELECT = """SELECT p.*, c.name AS category, c.slug AS category_slug,
  (SELECT ROUND(AVG(rating), 1) FROM reviews r WHERE r.product_id = p.id) AS rating,
  (SELECT COUNT(*) FROM reviews r WHERE r.product_id = p.id) AS n_reviews
  FROM products p JOIN categories c ON c.id = p.category_id"""


def create_app(db: Path, secret: str = "lynn-shop") -> Starlette:
    """The shop app on the database file ``db``."""
    tpl = templates("shop")

    def render(request: Request, name: str, status: int = 200, **ctx: object) -> Response:
        with connect(db) as con:
            cats = con.execute("SELECT * FROM categories ORDER BY name").fetchall()
            user = None
            uid = request.session.get("uid")
            if uid:
                user = con.execute("SELECT * FROM customers WHERE id = ?", (uid,)).fetchone()
                cart_n = con.execute(
                    "SELECT COALESCE(SUM(qty), 0) FROM cart_items WHERE customer_id = ?", (uid,)
                )
                ctx["cart_count"] = cart_n.fetchone()[0]
        return tpl.TemplateResponse(
            request, name, {"categories": cats, "user": user, **ctx}, status_code=status
        )

    def need_login(request: Request) -> Response | None:
        if not request.session.get("uid"):
            return redirect(f"/login?next={request.url.path}")
        return None

    async def home(request: Request) -> Response:
        with connect(db) as con:
            top = con.execute(
                PRODUCT_SELECT + " WHERE p.enabled = 1 ORDER BY n_reviews DESC, p.id LIMIT 8"
            ).fetchall()
        return render(request, "home.html", featured=top)

    def listing(request: Request, where: list[str], args: list[object], **ctx: object) -> Response:
        q = request.query_params
        min_p, max_p = floatarg(q.get("min_price")), floatarg(q.get("max_price"))
        if min_p is not None:
            where.append("p.price >= ?")
            args.append(min_p)
        if max_p is not None:
            where.append("p.price <= ?")
            args.append(max_p)
        if q.get("in_stock"):
            where.append("p.stock > 0")
        sort = q.get("sort") if q.get("sort") in SORTS else "relevance"
        sql_where = " WHERE p.enabled = 1" + "".join(f" AND {w}" for w in where)
        with connect(db) as con:
            total = con.execute(f"SELECT COUNT(*) FROM products p{sql_where}", args).fetchone()[0]
            page, offset, pages = page_slice(request, total)
            rows = con.execute(
                f"{PRODUCT_SELECT}{sql_where} ORDER BY {SORTS[sort]} LIMIT 20 OFFSET {offset}", args
            ).fetchall()
        params = dict(q)
        return render(
            request,
            "listing.html",
            products=rows,
            total=total,
            page=page,
            pages=pages,
            sort=sort,
            params=params,
            sorts=list(SORTS),
            **ctx,
        )

    async def category(request: Request) -> Response:
        slug = request.path_params["slug"]
        with connect(db) as con:
            cat = con.execute("SELECT * FROM categories WHERE slug = ?", (slug,)).fetchone()
        if cat is None:
            return render(request, "message.html", 404, title="Not found", message="No such category.")
        return listing(request, ["p.category_id = ?"], [cat["id"]], title=cat["name"], category=cat)

    async def search(request: Request) -> Response:
        q = request.query_params
        where: list[str] = []
        args: list[object] = []
        text = (q.get("q") or "").strip()
        if text:
            for word in text.split():
                where.append("(p.name LIKE ? OR p.sku LIKE ?)")
                args += [f"%{word}%", f"%{word}%"]
        if q.get("category"):
            where.append("c.slug = ?")
            args.append(q.get("category"))
        return listing(
            request, where, args, title=f"Search results for “{text}”" if text else "All products", query=text
        )

    async def product(request: Request) -> Response:
        pid = intarg(request.path_params["pid"])
        with connect(db) as con:
            p = con.execute(PRODUCT_SELECT + " WHERE p.id = ? AND p.enabled = 1", (pid,)).fetchone()
            reviews = con.execute(
                "SELECT r.*, c.name AS author FROM reviews r JOIN customers c ON c.id = r.customer_id "
                "WHERE r.product_id = ? ORDER BY r.created DESC, r.id DESC",
                (pid,),
            ).fetchall()
        if p is None:
            return render(request, "message.html", 404, title="Not found", message="No such product.")
        return render(request, "product.html", p=p, reviews=reviews, flash=request.query_params.get("msg"))

    login = login_view(
        db,
        render,
        "SELECT * FROM customers WHERE username = ? OR email = ?",
        "uid",
        "id",
        default_next="/account",
    )

    async def logout(request: Request) -> Response:
        request.session.clear()
        return redirect("/")

    async def cart_add(request: Request) -> Response:
        if r := need_login(request):
            return r
        form = await request.form()
        pid, qty = intarg(form.get("product_id")), max(1, intarg(form.get("qty"), 1) or 1)
        with connect(db) as con:
            if con.execute("SELECT 1 FROM products WHERE id = ?", (pid,)).fetchone() is None:
                return render(request, "message.html", 404, title="Not found", message="No such product.")
            con.execute(
                "INSERT INTO cart_items (customer_id, product_id, qty) VALUES (?, ?, ?) "
                "ON CONFLICT(customer_id, product_id) DO UPDATE SET qty = qty + excluded.qty",
                (request.session["uid"], pid, qty),
            )
        return redirect(f"/product/{pid}?msg=Added+to+cart")

    async def cart(request: Request) -> Response:
        if r := need_login(request):
            return r
        uid = request.session["uid"]
        if request.method == "POST":
            form = await request.form()
            pid = intarg(form.get("product_id"))
            qty = intarg(form.get("qty"), 0) or 0
            with connect(db) as con:
                if form.get("action") == "remove" or qty <= 0:
                    con.execute("DELETE FROM cart_items WHERE customer_id = ? AND product_id = ?", (uid, pid))
                else:
                    con.execute(
                        "UPDATE cart_items SET qty = ? WHERE customer_id = ? AND product_id = ?",
                        (qty, uid, pid),
                    )
            return redirect("/cart")
        with connect(db) as con:
            items = con.execute(
                "SELECT p.id, p.name, p.price, ci.qty, p.price * ci.qty AS line FROM cart_items ci "
                "JOIN products p ON p.id = ci.product_id WHERE ci.customer_id = ? ORDER BY ci.id",
                (uid,),
            ).fetchall()
        return render(request, "cart.html", items=items, total=sum(i["line"] for i in items))

    async def checkout(request: Request) -> Response:
        if r := need_login(request):
            return r
        uid = request.session["uid"]
        with connect(db) as con:
            items = con.execute(
                "SELECT p.id, p.name, p.price, ci.qty FROM cart_items ci JOIN products p ON p.id = ci.product_id "
                "WHERE ci.customer_id = ? ORDER BY ci.id",
                (uid,),
            ).fetchall()
            user = con.execute("SELECT * FROM customers WHERE id = ?", (uid,)).fetchone()
            if request.method == "POST":
                form = await request.form()
                if not items:
                    return render(
                        request, "message.html", 400, title="Checkout", message="Your cart is empty."
                    )
                shipping = "express" if form.get("shipping") == "express" else "standard"
                address = str(form.get("address") or f"{user['street']}, {user['city']}").strip()
                total = sum(i["price"] * i["qty"] for i in items) + (15.0 if shipping == "express" else 0.0)
                cur = con.execute(
                    "INSERT INTO orders (customer_id, created, status, total, shipping, address) VALUES (?, ?, ?, ?, ?, ?)",
                    (uid, date(2025, 12, 1).isoformat(), "pending", round(total, 2), shipping, address),
                )
                oid = cur.lastrowid
                con.executemany(
                    "INSERT INTO order_items (order_id, product_id, qty, price) VALUES (?, ?, ?, ?)",
                    [(oid, i["id"], i["qty"], i["price"]) for i in items],
                )
                con.execute("DELETE FROM cart_items WHERE customer_id = ?", (uid,))
                return redirect(f"/account/orders/{oid}?msg=placed")
        return render(
            request,
            "checkout.html",
            items=items,
            total=sum(i["price"] * i["qty"] for i in items),
            address=f"{user['street']}, {user['city']}",
        )

    async def account(request: Request) -> Response:
        if r := need_login(request):
            return r
        msg = None
        if request.method == "POST":
            form = await request.form()
            street, city = str(form.get("street", "")).strip(), str(form.get("city", "")).strip()
            if street and city:
                with connect(db) as con:
                    con.execute(
                        "UPDATE customers SET street = ?, city = ? WHERE id = ?",
                        (street, city, request.session["uid"]),
                    )
                msg = "Address saved."
            else:
                msg = "Street and city are required."
        return render(request, "account.html", msg=msg)

    async def orders(request: Request) -> Response:
        if r := need_login(request):
            return r
        with connect(db) as con:
            rows = con.execute(
                "SELECT * FROM orders WHERE customer_id = ? ORDER BY id DESC", (request.session["uid"],)
            ).fetchall()
        return render(request, "orders.html", orders=rows)

    async def order(request: Request) -> Response:
        if r := need_login(request):
            return r
        oid = intarg(request.path_params["oid"])
        with connect(db) as con:
            o = con.execute(
                "SELECT * FROM orders WHERE id = ? AND customer_id = ?", (oid, request.session["uid"])
            ).fetchone()
            items = con.execute(
                "SELECT oi.*, p.name FROM order_items oi JOIN products p ON p.id = oi.product_id "
                "WHERE oi.order_id = ? ORDER BY oi.id",
                (oid,),
            ).fetchall()
        if o is None:
            return render(request, "message.html", 404, title="Not found", message="No such order.")
        return render(
            request, "order.html", o=o, items=items, placed=request.query_params.get("msg") == "placed"
        )

    async def wishlist(request: Request) -> Response:
        if r := need_login(request):
            return r
        uid = request.session["uid"]
        if request.method == "POST":
            form = await request.form()
            pid = intarg(form.get("product_id"))
            with connect(db) as con:
                if form.get("action") == "remove":
                    con.execute("DELETE FROM wishlist WHERE customer_id = ? AND product_id = ?", (uid, pid))
                    return redirect("/wishlist")
                con.execute(
                    "INSERT OR IGNORE INTO wishlist (customer_id, product_id) VALUES (?, ?)", (uid, pid)
                )
            return redirect(f"/product/{pid}?msg=Added+to+wishlist")
        with connect(db) as con:
            items = con.execute(
                "SELECT p.* FROM wishlist w JOIN products p ON p.id = w.product_id "
                "WHERE w.customer_id = ? ORDER BY w.id",
                (uid,),
            ).fetchall()
        return render(request, "wishlist.html", items=items)

    async def review(request: Request) -> Response:
        if r := need_login(request):
            return r
        pid = intarg(request.path_params["pid"])
        form = await request.form()
        rating = intarg(form.get("rating"))
        title, body = str(form.get("title", "")).strip(), str(form.get("body", "")).strip()
        if rating not in (1, 2, 3, 4, 5) or not title:
            return redirect(f"/product/{pid}?msg=A+review+needs+a+rating+and+a+title")
        with connect(db) as con:
            con.execute(
                "INSERT INTO reviews (product_id, customer_id, rating, title, body, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (pid, request.session["uid"], rating, title, body, "2025-12-01"),
            )
        return redirect(f"/product/{pid}?msg=Thanks+for+your+review")

    routes = [
        Route("/", home),
        Route("/category/{slug}", category),
        Route("/search", search),
        Route("/product/{pid}", product),
        Route("/product/{pid}/review", review, methods=["POST"]),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["GET", "POST"]),
        Route("/cart/add", cart_add, methods=["POST"]),
        Route("/cart", cart, methods=["GET", "POST"]),
        Route("/checkout", checkout, methods=["GET", "POST"]),
        Route("/account", account, methods=["GET", "POST"]),
        Route("/account/orders", orders),
        Route("/account/orders/{oid}", order),
        Route("/wishlist", wishlist, methods=["GET", "POST"]),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(SessionMiddleware, secret_key=secret, session_cookie="lynn_shop")],
    )
