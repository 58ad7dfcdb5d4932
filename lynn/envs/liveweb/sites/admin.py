"""The bundled **admin**: the shop's back office on the shop database — orders grid with filters, sort and
pagination, order status, product editing, customers, a monthly sales report."""

from __future__ import annotations

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
from lynn.envs.liveweb.sites.seed import ORDER_STATUSES

ORDER_SORTS = {
    "id": "o.id",
    "date": "o.created",
    "total": "o.total",
    "customer": "c.name",
    "status": "o.status",
}


def create_app(db: Path, secret: str = "lynn-admin") -> Starlette:
    """The admin app on the shop database file ``db``."""
    tpl = templates("admin")

    def render(request: Request, name: str, status: int = 200, **ctx: object) -> Response:
        return tpl.TemplateResponse(
            request, name, {"admin": request.session.get("admin"), **ctx}, status_code=status
        )

    def guard(request: Request) -> Response | None:
        if not request.session.get("admin"):
            return redirect(f"/login?next={request.url.path}")
        return None

    login = login_view(db, render, "SELECT * FROM admins WHERE username = ?", "admin", "username")

    async def logout(request: Request) -> Response:
        request.session.clear()
        return redirect("/login")

    async def dashboard(request: Request) -> Response:
        if r := guard(request):
            return r
        with connect(db) as con:
            counts = con.execute(
                "SELECT status, COUNT(*) AS n FROM orders GROUP BY status ORDER BY status"
            ).fetchall()
            n_customers = con.execute("SELECT COUNT(*) FROM customers").fetchone()[0]
            n_products = con.execute("SELECT COUNT(*) FROM products").fetchone()[0]
        return render(
            request, "dashboard.html", counts=counts, n_customers=n_customers, n_products=n_products
        )

    async def orders(request: Request) -> Response:
        if r := guard(request):
            return r
        q = request.query_params
        where, args = [], []
        if q.get("status") in ORDER_STATUSES:
            where.append("o.status = ?")
            args.append(q.get("status"))
        if q.get("customer"):
            where.append("c.name LIKE ?")
            args.append(f"%{q.get('customer').strip()}%")
        if q.get("date_from"):
            where.append("o.created >= ?")
            args.append(q.get("date_from"))
        if q.get("date_to"):
            where.append("o.created <= ?")
            args.append(q.get("date_to"))
        sort = q.get("sort") if q.get("sort") in ORDER_SORTS else "id"
        direction = "ASC" if q.get("dir") == "asc" else "DESC"
        sql_where = (" WHERE " + " AND ".join(where)) if where else ""
        base = f"FROM orders o JOIN customers c ON c.id = o.customer_id{sql_where}"
        with connect(db) as con:
            total = con.execute(f"SELECT COUNT(*) {base}", args).fetchone()[0]
            page, offset, pages = page_slice(request, total)
            rows = con.execute(
                f"SELECT o.*, c.name AS customer {base} ORDER BY {ORDER_SORTS[sort]} {direction}, o.id "
                f"{direction} LIMIT 20 OFFSET {offset}",
                args,
            ).fetchall()
        return render(
            request,
            "orders.html",
            orders=rows,
            total=total,
            page=page,
            pages=pages,
            sort=sort,
            dir=direction.lower(),
            params=dict(q),
            statuses=ORDER_STATUSES,
            sorts=list(ORDER_SORTS),
        )

    async def order(request: Request) -> Response:
        if r := guard(request):
            return r
        oid = intarg(request.path_params["oid"])
        msg = None
        with connect(db) as con:
            if request.method == "POST":
                status = (await request.form()).get("status")
                if status in ORDER_STATUSES:
                    con.execute("UPDATE orders SET status = ? WHERE id = ?", (status, oid))
                    msg = f"Order status changed to {status}."
            o = con.execute(
                "SELECT o.*, c.name AS customer, c.id AS cid, c.email FROM orders o JOIN customers c "
                "ON c.id = o.customer_id WHERE o.id = ?",
                (oid,),
            ).fetchone()
            items = con.execute(
                "SELECT oi.*, p.name, p.sku FROM order_items oi JOIN products p ON p.id = oi.product_id "
                "WHERE oi.order_id = ? ORDER BY oi.id",
                (oid,),
            ).fetchall()
        if o is None:
            return render(request, "message.html", 404, title="Not found", message="No such order.")
        return render(request, "order.html", o=o, items=items, statuses=ORDER_STATUSES, msg=msg)

    async def products(request: Request) -> Response:
        if r := guard(request):
            return r
        q = (request.query_params.get("q") or "").strip()
        where, args = "", []
        if q:
            where = " WHERE p.name LIKE ? OR p.sku LIKE ?"
            args = [f"%{q}%", f"%{q}%"]
        with connect(db) as con:
            total = con.execute(f"SELECT COUNT(*) FROM products p{where}", args).fetchone()[0]
            page, offset, pages = page_slice(request, total)
            rows = con.execute(
                f"SELECT p.*, c.name AS category FROM products p JOIN categories c ON c.id = p.category_id"
                f"{where} ORDER BY p.id LIMIT 20 OFFSET {offset}",
                args,
            ).fetchall()
        return render(
            request,
            "products.html",
            products=rows,
            total=total,
            page=page,
            pages=pages,
            q=q,
            params=dict(request.query_params),
        )

    async def product_edit(request: Request) -> Response:
        if r := guard(request):
            return r
        pid = intarg(request.path_params["pid"])
        msg = error = None
        with connect(db) as con:
            if request.method == "POST":
                form = await request.form()
                price, stock = floatarg(form.get("price")), intarg(form.get("stock"))
                name = str(form.get("name", "")).strip()
                if price is None or price < 0 or stock is None or stock < 0 or not name:
                    error = "Name, a non-negative price and a non-negative stock are required."
                else:
                    con.execute(
                        "UPDATE products SET name = ?, price = ?, stock = ?, enabled = ? WHERE id = ?",
                        (name, round(price, 2), stock, 1 if form.get("enabled") else 0, pid),
                    )
                    msg = "Product saved."
            p = con.execute(
                "SELECT p.*, c.name AS category FROM products p JOIN categories c ON c.id = p.category_id "
                "WHERE p.id = ?",
                (pid,),
            ).fetchone()
        if p is None:
            return render(request, "message.html", 404, title="Not found", message="No such product.")
        return render(request, "product.html", p=p, msg=msg, error=error)

    async def customers(request: Request) -> Response:
        if r := guard(request):
            return r
        q = (request.query_params.get("q") or "").strip()
        with connect(db) as con:
            rows = con.execute(
                "SELECT c.*, (SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id) AS n_orders FROM customers c "
                "WHERE c.name LIKE ? OR c.email LIKE ? ORDER BY c.name",
                (f"%{q}%", f"%{q}%"),
            ).fetchall()
        return render(request, "customers.html", customers=rows, q=q)

    async def customer(request: Request) -> Response:
        if r := guard(request):
            return r
        cid = intarg(request.path_params["cid"])
        with connect(db) as con:
            c = con.execute("SELECT * FROM customers WHERE id = ?", (cid,)).fetchone()
            rows = con.execute(
                "SELECT * FROM orders WHERE customer_id = ? ORDER BY id DESC", (cid,)
            ).fetchall()
        if c is None:
            return render(request, "message.html", 404, title="Not found", message="No such customer.")
        spent = sum(o["total"] for o in rows if o["status"] != "cancelled")
        return render(request, "customer.html", c=c, orders=rows, spent=spent)

    async def sales(request: Request) -> Response:
        if r := guard(request):
            return r
        year = intarg(request.query_params.get("year"), 2025) or 2025
        with connect(db) as con:
            rows = con.execute(
                "SELECT substr(created, 1, 7) AS month, COUNT(*) AS n, ROUND(SUM(total), 2) AS revenue FROM orders "
                "WHERE status != 'cancelled' AND substr(created, 1, 4) = ? GROUP BY month ORDER BY month",
                (str(year),),
            ).fetchall()
            best = con.execute(
                "SELECT p.name, SUM(oi.qty) AS units FROM order_items oi JOIN orders o ON o.id = oi.order_id "
                "JOIN products p ON p.id = oi.product_id WHERE o.status != 'cancelled' AND substr(o.created, 1, 4) = ? "
                "GROUP BY p.id ORDER BY units DESC, p.id LIMIT 5",
                (str(year),),
            ).fetchall()
        return render(
            request,
            "sales.html",
            rows=rows,
            year=year,
            best=best,
            total=round(sum(r["revenue"] for r in rows), 2),
            n=sum(r["n"] for r in rows),
        )

    routes = [
        Route("/", dashboard),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["GET", "POST"]),
        Route("/orders", orders),
        Route("/orders/{oid}", order, methods=["GET", "POST"]),
        Route("/products", products),
        Route("/products/{pid}/edit", product_edit, methods=["GET", "POST"]),
        Route("/customers", customers),
        Route("/customers/{cid}", customer),
        Route("/reports/sales", sales),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(SessionMiddleware, secret_key=secret, session_cookie="lynn_admin")],
    )
