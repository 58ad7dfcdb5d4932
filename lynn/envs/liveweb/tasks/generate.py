"""Generate the bundled task bank (WebArena JSON format) from templates over the seed databases.

Run ``python -m lynn.envs.liveweb.tasks.generate`` to rewrite ``liveweb_tasks.json``; the output is
deterministic (fixed seeds, sorted queries), so the committed file is reproducible. Each task also
carries ``expert``: a plan of element-level steps (find by role and name, read with a regex) that the
expert agent turns into action strings on what it observes.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from lynn.envs.liveweb.sites.seed import ADMIN_USER, ORDER_STATUSES

OUT = Path(__file__).with_name("liveweb_tasks.json")
PER_TEMPLATE = 8
TEST_EVERY = 4  # every 4th instance of a template goes to the test split

Task = dict[str, Any]
TEMPLATES: list[tuple[str, str, str, str, Callable[..., Iterator[tuple[dict, Task]]]]] = []


def template(site: str, kind: str, key: str, intent: str) -> Callable:
    """Register a generator of (instantiation_dict, partial task) for one intent template."""

    def deco(fn: Callable[..., Iterator[tuple[dict, Task]]]) -> Callable:
        TEMPLATES.append((site, kind, key, intent, fn))
        return fn

    return deco


def money(v: float) -> str:
    return f"${v:,.2f}"


def click(role: str, name: str, **kw: Any) -> dict:
    return {"op": "click", "role": role, "name": name, **kw}


def fill(role: str, name: str, value: str) -> dict:
    return {"op": "fill", "role": role, "name": name, "value": value}


def select(name: str, value: str) -> dict:
    return {"op": "select", "role": "combobox", "name": name, "value": value}


def goto(url: str) -> dict:
    return {"op": "goto", "url": url}


def answer(text: str | None = None, extract: str | None = None, after: str | None = None) -> dict:
    step: dict[str, Any] = {"op": "answer"}
    if text is not None:
        step["text"] = text
    if extract is not None:
        step["extract"] = extract
    if after is not None:
        step["after"] = after
    return step


DONE = answer("done")


def exact(v: str) -> dict:
    return {"eval_types": ["string_match"], "reference_answers": {"exact_match": v}}


def includes(*v: str) -> dict:
    return {"eval_types": ["string_match"], "reference_answers": {"must_include": list(v)}}


def url_eval(url: str) -> dict:
    return {"eval_types": ["url_match"], "reference_url": url}


def db_eval(
    site: str, query: str, params: list, expected: Any, description: str, html: list | None = None
) -> dict:
    spec: dict[str, Any] = {
        "eval_types": ["db_check"],
        "db_check": [
            {"site": site, "query": query, "params": params, "expected": expected, "description": description}
        ],
    }
    if html:
        spec["eval_types"].append("program_html")
        spec["program_html"] = html
    return spec


def search_product(name: str) -> list[dict]:
    return [fill("textbox", "Search products", name), click("button", "Go"), click("link", name)]


# --- shop ---------------------------------------------------------------------------------------
def products(db: sqlite3.Connection, rng: random.Random, n: int = PER_TEMPLATE) -> list[sqlite3.Row]:
    rows = db.execute(
        "SELECT p.*, c.name AS category, c.slug FROM products p JOIN categories c ON c.id = p.category_id "
        "ORDER BY p.id"
    ).fetchall()
    return rng.sample(rows, n)


@template("shop", "info", "product_price", "What is the price of the {{product}} in the shop?")
def t_price(db, rng):
    for p in products(db, rng):
        yield (
            {"product": p["name"]},
            {
                "eval": exact(money(p["price"])),
                "expert": [*search_product(p["name"]), answer(extract=r"Price: (\$[\d,.]+)")],
            },
        )


@template("shop", "info", "product_reviews", "How many reviews does the {{product}} have?")
def t_reviews(db, rng):
    for p in products(db, rng):
        n = db.execute("SELECT COUNT(*) FROM reviews WHERE product_id = ?", (p["id"],)).fetchone()[0]
        yield (
            {"product": p["name"]},
            {
                "eval": exact(str(n)),
                "expert": [*search_product(p["name"]), answer(extract=r"\((\d+) reviews\)")],
            },
        )


@template("shop", "info", "product_sku", "What is the SKU of the {{product}}?")
def t_sku(db, rng):
    for p in products(db, rng):
        yield (
            {"product": p["name"]},
            {
                "eval": exact(p["sku"]),
                "expert": [*search_product(p["name"]), answer(extract=r"SKU: ([A-Z&]{2}-\d+)")],
            },
        )


@template(
    "shop",
    "info",
    "category_count_under",
    "How many products in the {{category}} category cost at most ${{max_price}}?",
)
def t_cat_count(db, rng):
    cats = db.execute("SELECT * FROM categories ORDER BY id").fetchall()
    for _ in range(PER_TEMPLATE):
        c = rng.choice(cats)
        limit = rng.choice([20, 30, 40, 50, 75, 100])
        n = db.execute(
            "SELECT COUNT(*) FROM products WHERE category_id = ? AND price <= ? AND enabled = 1",
            (c["id"], limit),
        ).fetchone()[0]
        yield (
            {"category": c["name"], "max_price": str(limit)},
            {
                "eval": exact(str(n)),
                "expert": [
                    click("link", c["name"]),
                    fill("textbox", "Max price", str(limit)),
                    click("button", "Apply filters"),
                    answer(extract=r"(\d+) products found"),
                ],
            },
        )


@template("shop", "info", "category_cheapest", "Which product is the cheapest in the {{category}} category?")
def t_cheapest(db, rng):
    cats = db.execute("SELECT * FROM categories ORDER BY id").fetchall()
    for c in rng.sample(cats, PER_TEMPLATE):
        p = db.execute(
            "SELECT name FROM products WHERE category_id = ? ORDER BY price, id LIMIT 1", (c["id"],)
        ).fetchone()
        yield (
            {"category": c["name"]},
            {
                "eval": exact(p["name"]),
                "expert": [
                    click("link", c["name"]),
                    select("Sort by", "price_asc"),
                    click("button", "Apply filters"),
                    answer(extract=r'link "([^"]+)"', after='table "Products"'),
                ],
            },
        )


def customers_with_orders(db: sqlite3.Connection, rng: random.Random) -> list[sqlite3.Row]:
    rows = db.execute(
        "SELECT * FROM customers WHERE id IN (SELECT customer_id FROM orders) ORDER BY id"
    ).fetchall()
    return rng.sample(rows, PER_TEMPLATE)


@template("shop", "info", "my_order_status", "What is the status of my order #{{order_id}}?")
def t_order_status(db, rng):
    for c in customers_with_orders(db, rng):
        o = rng.choice(
            db.execute("SELECT * FROM orders WHERE customer_id = ? ORDER BY id", (c["id"],)).fetchall()
        )
        yield (
            {"order_id": str(o["id"])},
            {
                "login": {"shop": c["username"]},
                "eval": exact(o["status"]),
                "expert": [
                    click("link", "My account"),
                    click("link", "My orders"),
                    click("link", f"Order #{o['id']}"),
                    answer(extract=r"Status: (\w+)"),
                ],
            },
        )


@template("shop", "info", "my_last_order_total", "What was the total of my most recent order?")
def t_last_total(db, rng):
    for c in customers_with_orders(db, rng):
        o = db.execute(
            "SELECT * FROM orders WHERE customer_id = ? ORDER BY id DESC LIMIT 1", (c["id"],)
        ).fetchone()
        yield (
            {"customer": c["username"]},
            {
                "login": {"shop": c["username"]},
                "eval": exact(money(o["total"])),
                "expert": [
                    click("link", "My account"),
                    click("link", "My orders"),
                    answer(extract=r'cell "(\$[\d,.]+)"', after='table "Orders"'),
                ],
            },
        )


@template("shop", "info", "my_order_count", "How many orders have I placed in total?")
def t_order_count(db, rng):
    for c in customers_with_orders(db, rng):
        n = db.execute("SELECT COUNT(*) FROM orders WHERE customer_id = ?", (c["id"],)).fetchone()[0]
        yield (
            {"customer": c["username"]},
            {
                "login": {"shop": c["username"]},
                "eval": exact(str(n)),
                "expert": [
                    click("link", "My account"),
                    click("link", "My orders"),
                    {"op": "count_rows", "table": "Orders"},
                ],
            },
        )


@template("shop", "nav", "open_product", "Open the product page of the {{product}}.")
def t_open_product(db, rng):
    for p in products(db, rng):
        yield (
            {"product": p["name"]},
            {
                "eval": url_eval(f"__SHOP__/product/{p['id']}"),
                "expert": [*search_product(p["name"]), DONE],
            },
        )


@template("shop", "nav", "category_sorted", "Show the {{category}} category sorted by {{sort_label}}.")
def t_cat_sorted(db, rng):
    cats = db.execute("SELECT * FROM categories ORDER BY id").fetchall()
    sorts = {
        "price_asc": "price, lowest first",
        "price_desc": "price, highest first",
        "rating": "rating",
        "name": "name",
    }
    for _ in range(PER_TEMPLATE):
        c, s = rng.choice(cats), rng.choice(sorted(sorts))
        yield (
            {"category": c["name"], "sort_label": sorts[s]},
            {
                "eval": url_eval(f"__SHOP__/category/{c['slug']}?sort={s}"),
                "expert": [
                    click("link", c["name"]),
                    select("Sort by", s),
                    click("button", "Apply filters"),
                    DONE,
                ],
            },
        )


@template("shop", "nav", "search_results", "Search the shop for “{{query}}”.")
def t_search(db, rng):
    words = sorted({w for (n,) in db.execute("SELECT name FROM products") for w in n.split()[1:]})
    for q in rng.sample(words, PER_TEMPLATE):
        yield (
            {"query": q},
            {
                "eval": url_eval(f"__SHOP__/search?q={q}"),
                "expert": [fill("textbox", "Search products", q), click("button", "Go"), DONE],
            },
        )


@template("shop", "nav", "my_orders_page", "Go to the page that lists my orders.")
def t_orders_page(db, rng):
    for c in customers_with_orders(db, rng):
        yield (
            {"customer": c["username"]},
            {
                "login": {"shop": c["username"]},
                "eval": url_eval("__SHOP__/account/orders"),
                "expert": [click("link", "My account"), click("link", "My orders"), DONE],
            },
        )


def shoppers(db: sqlite3.Connection, rng: random.Random) -> list[sqlite3.Row]:
    return rng.sample(db.execute("SELECT * FROM customers ORDER BY id").fetchall(), PER_TEMPLATE)


@template("shop", "modify", "add_to_cart", "Add {{qty}} of the {{product}} to my cart.")
def t_add_cart(db, rng):
    for c, p in zip(shoppers(db, rng), products(db, rng), strict=True):
        qty = rng.randint(1, 4)
        yield (
            {"qty": str(qty), "product": p["name"]},
            {
                "login": {"shop": c["username"]},
                "eval": db_eval(
                    "shop",
                    "SELECT qty FROM cart_items WHERE customer_id = ? AND product_id = ?",
                    [c["id"], p["id"]],
                    qty,
                    "quantity in cart",
                ),
                "expert": [
                    *search_product(p["name"]),
                    fill("spinbutton", "Quantity", str(qty)),
                    click("button", "Add to cart"),
                    DONE,
                ],
            },
        )


@template("shop", "modify", "add_to_wishlist", "Add the {{product}} to my wishlist.")
def t_wishlist(db, rng):
    for c, p in zip(shoppers(db, rng), products(db, rng), strict=True):
        yield (
            {"product": p["name"]},
            {
                "login": {"shop": c["username"]},
                "eval": db_eval(
                    "shop",
                    "SELECT COUNT(*) FROM wishlist WHERE customer_id = ? AND product_id = ?",
                    [c["id"], p["id"]],
                    1,
                    "product in wishlist",
                ),
                "expert": [*search_product(p["name"]), click("button", "Add to wishlist"), DONE],
            },
        )


@template("shop", "modify", "buy_express", "Buy one {{product}} with express shipping.")
def t_buy(db, rng):
    max_order = db.execute("SELECT MAX(id) FROM orders").fetchone()[0]
    for c, p in zip(shoppers(db, rng), products(db, rng), strict=True):
        yield (
            {"product": p["name"]},
            {
                "login": {"shop": c["username"]},
                "eval": db_eval(
                    "shop",
                    "SELECT COUNT(*) FROM orders o JOIN order_items i ON i.order_id = o.id WHERE o.id > ? AND "
                    "o.customer_id = ? AND i.product_id = ? AND i.qty = 1 AND o.shipping = 'express'",
                    [max_order, c["id"], p["id"]],
                    1,
                    "new express order with the product",
                    html=[
                        {
                            "url": "last",
                            "locator": "",
                            "required_contents": {"must_include": ["has been placed"]},
                        }
                    ],
                ),
                "expert": [
                    *search_product(p["name"]),
                    click("button", "Add to cart"),
                    click("link", "Cart (1)"),
                    click("link", "Proceed to checkout"),
                    select("Shipping method", "Express ($15.00)"),
                    click("button", "Place order"),
                    DONE,
                ],
            },
        )


@template(
    "shop", "modify", "write_review", "Write a {{rating}}-star review titled “{{title}}” for the {{product}}."
)
def t_review(db, rng):
    titles = ["Happy with it", "Does the job", "Great gift", "Not for me", "Solid choice", "Mixed feelings"]
    for c, p in zip(shoppers(db, rng), products(db, rng), strict=True):
        rating, title = rng.randint(1, 5), rng.choice(titles)
        yield (
            {"rating": str(rating), "title": title, "product": p["name"]},
            {
                "login": {"shop": c["username"]},
                "eval": db_eval(
                    "shop",
                    "SELECT rating FROM reviews WHERE customer_id = ? AND product_id = ? AND title = ? "
                    "ORDER BY id DESC",
                    [c["id"], p["id"], title],
                    rating,
                    "new review",
                ),
                "expert": [
                    *search_product(p["name"]),
                    select("Rating", f"{rating} stars"),
                    fill("textbox", "Review title", title),
                    fill("textbox", "Review text", "Written by Lynn."),
                    click("button", "Submit review"),
                    DONE,
                ],
            },
        )


@template("shop", "modify", "change_address", "Change my address to {{street}}, {{city}}.")
def t_address(db, rng):
    streets = [
        "12 Harbour View",
        "7 Orchard Close",
        "221 Baker St",
        "5 Rue Verte",
        "90 Lake Shore Dr",
        "3 Mill Lane",
    ]
    cities = ["Porto", "Bergen", "Denver", "Osaka", "Accra", "Halifax"]
    for c in shoppers(db, rng):
        street, city = rng.choice(streets), rng.choice(cities)
        yield (
            {"street": street, "city": city},
            {
                "login": {"shop": c["username"]},
                "eval": db_eval(
                    "shop",
                    "SELECT street || ', ' || city FROM customers WHERE id = ?",
                    [c["id"]],
                    f"{street}, {city}",
                    "saved address",
                ),
                "expert": [
                    click("link", "My account"),
                    fill("textbox", "Street", street),
                    fill("textbox", "City", city),
                    click("button", "Save address"),
                    DONE,
                ],
            },
        )


# --- forum --------------------------------------------------------------------------------------
FORUM_POST = """SELECT p.*, u.username AS author, s.name AS sub,
  (SELECT COALESCE(SUM(value), 0) FROM votes v WHERE v.post_id = p.id) AS score,
  (SELECT COUNT(*) FROM comments c WHERE c.post_id = p.id) AS n_comments
  FROM posts p JOIN users u ON u.id = p.user_id JOIN subforums s ON s.id = p.subforum_id"""


def posts(db: sqlite3.Connection, rng: random.Random) -> list[sqlite3.Row]:
    return rng.sample(db.execute(FORUM_POST + " ORDER BY p.id").fetchall(), PER_TEMPLATE)


def search_post(title: str) -> list[dict]:
    return [fill("textbox", "Search posts", title), click("button", "Search"), click("link", title)]


@template("forum", "info", "post_comments", "How many comments does the forum post “{{title}}” have?")
def t_comments(db, rng):
    for p in posts(db, rng):
        yield (
            {"title": p["title"]},
            {
                "eval": exact(str(p["n_comments"])),
                "expert": [*search_post(p["title"]), answer(extract=r"(\d+) comments")],
            },
        )


@template("forum", "info", "post_author", "Who wrote the forum post “{{title}}”?")
def t_author(db, rng):
    for p in posts(db, rng):
        yield (
            {"title": p["title"]},
            {
                "eval": exact(p["author"]),
                "expert": [*search_post(p["title"]), answer(extract=r'text: by\n\s*\[\w+\] link "([^"]+)"')],
            },
        )


@template("forum", "info", "post_score", "What is the score of the forum post “{{title}}”?")
def t_score(db, rng):
    for p in posts(db, rng):
        yield (
            {"title": p["title"]},
            {
                "eval": exact(str(p["score"])),
                "expert": [*search_post(p["title"]), answer(extract=r"Score: (-?\d+)")],
            },
        )


@template("forum", "info", "subforum_count", "How many posts are there in f/{{forum}}?")
def t_sub_count(db, rng):
    subs = db.execute("SELECT * FROM subforums ORDER BY id").fetchall()
    for s in rng.sample(subs, PER_TEMPLATE):
        n = db.execute("SELECT COUNT(*) FROM posts WHERE subforum_id = ?", (s["id"],)).fetchone()[0]
        yield (
            {"forum": s["name"]},
            {
                "eval": exact(str(n)),
                "expert": [click("link", f"f/{s['name']}"), answer(extract=r"(\d+) posts")],
            },
        )


@template("forum", "info", "subforum_top", "What is the title of the highest-scoring post in f/{{forum}}?")
def t_sub_top(db, rng):
    subs = db.execute("SELECT * FROM subforums ORDER BY id").fetchall()
    for s in rng.sample(subs, PER_TEMPLATE):
        top = db.execute(
            FORUM_POST + " WHERE p.subforum_id = ? ORDER BY score DESC, p.id DESC LIMIT 1", (s["id"],)
        ).fetchone()
        yield (
            {"forum": s["name"]},
            {
                "eval": exact(top["title"]),
                "expert": [
                    click("link", f"f/{s['name']}"),
                    click("link", "top"),
                    answer(extract=r'link "([^"]+)"', after='table "Posts"'),
                ],
            },
        )


@template("forum", "info", "user_joined", "On what date did the forum user {{user}} join?")
def t_joined(db, rng):
    for u in rng.sample(db.execute("SELECT * FROM users ORDER BY id").fetchall(), PER_TEMPLATE):
        yield (
            {"user": u["username"]},
            {
                "eval": exact(u["joined"]),
                "expert": [
                    goto(f"__FORUM__/user/{u['username']}"),
                    answer(extract=r"Joined: (\d{4}-\d\d-\d\d)"),
                ],
            },
        )


@template("forum", "nav", "subforum_sorted", "Show f/{{forum}} sorted by {{sort}}.")
def t_sub_sorted(db, rng):
    subs = db.execute("SELECT * FROM subforums ORDER BY id").fetchall()
    for _ in range(PER_TEMPLATE):
        s, sort = rng.choice(subs), rng.choice(["top", "comments", "new"])
        yield (
            {"forum": s["name"], "sort": sort},
            {
                "eval": url_eval(f"__FORUM__/f/{s['name']}?sort={sort}"),
                "expert": [click("link", f"f/{s['name']}"), click("link", sort), DONE],
            },
        )


@template("forum", "nav", "author_profile", "Open the profile of the author of the forum post “{{title}}”.")
def t_author_profile(db, rng):
    for p in posts(db, rng):
        yield (
            {"title": p["title"]},
            {
                "eval": url_eval(f"__FORUM__/user/{p['author']}"),
                "expert": [*search_post(p["title"]), click("link", p["author"]), DONE],
            },
        )


@template("forum", "nav", "open_post", "Open the forum post “{{title}}”.")
def t_open_post(db, rng):
    for p in posts(db, rng):
        yield (
            {"title": p["title"]},
            {"eval": url_eval(f"__FORUM__/post/{p['id']}"), "expert": [*search_post(p["title"]), DONE]},
        )


def forum_users(db: sqlite3.Connection, rng: random.Random) -> list[sqlite3.Row]:
    return rng.sample(db.execute("SELECT * FROM users ORDER BY id").fetchall(), PER_TEMPLATE)


@template(
    "forum", "modify", "create_post", "Create a post in f/{{forum}} titled “{{title}}” saying “{{body}}”."
)
def t_create(db, rng):
    subs = [r["name"] for r in db.execute("SELECT name FROM subforums ORDER BY id")]
    titles = [
        "Weekend project report",
        "Looking for recommendations",
        "First time here",
        "Lessons learned",
        "Quick question",
        "Monthly check-in",
    ]
    bodies = ["Happy to hear your thoughts.", "Any advice is welcome.", "Thanks in advance!", "More soon."]
    for u in forum_users(db, rng):
        s, title, body = rng.choice(subs), rng.choice(titles), rng.choice(bodies)
        yield (
            {"forum": s, "title": title, "body": body},
            {
                "login": {"forum": u["username"]},
                "eval": db_eval(
                    "forum",
                    "SELECT COUNT(*) FROM posts p JOIN subforums s ON s.id = p.subforum_id "
                    "WHERE p.user_id = ? AND s.name = ? AND p.title = ? AND p.body = ?",
                    [u["id"], s, title, body],
                    1,
                    "new post",
                    html=[{"url": "last", "locator": "h1", "required_contents": {"exact_match": title}}],
                ),
                "expert": [
                    click("link", "New post"),
                    select("Forum", s),
                    fill("textbox", "Title", title),
                    fill("textbox", "Body", body),
                    click("button", "Create post"),
                    DONE,
                ],
            },
        )


@template("forum", "modify", "comment", "Reply “{{text}}” to the forum post “{{title}}”.")
def t_comment(db, rng):
    texts = ["Thanks for sharing!", "I learned something today.", "Bookmarking this.", "Great point."]
    for u, p in zip(forum_users(db, rng), posts(db, rng), strict=True):
        text = rng.choice(texts)
        yield (
            {"text": text, "title": p["title"]},
            {
                "login": {"forum": u["username"]},
                "eval": db_eval(
                    "forum",
                    "SELECT COUNT(*) FROM comments WHERE user_id = ? AND post_id = ? AND body = ?",
                    [u["id"], p["id"], text],
                    1,
                    "new comment",
                ),
                "expert": [
                    *search_post(p["title"]),
                    fill("textbox", "Comment", text),
                    click("button", "Add comment"),
                    DONE,
                ],
            },
        )


@template("forum", "modify", "vote", "{{direction}} the forum post “{{title}}”.")
def t_vote(db, rng):
    for u, p in zip(forum_users(db, rng), posts(db, rng), strict=True):
        up = rng.random() < 0.6
        yield (
            {"direction": "Upvote" if up else "Downvote", "title": p["title"]},
            {
                "login": {"forum": u["username"]},
                "eval": db_eval(
                    "forum",
                    "SELECT value FROM votes WHERE user_id = ? AND post_id = ?",
                    [u["id"], p["id"]],
                    1 if up else -1,
                    "vote",
                ),
                "expert": [*search_post(p["title"]), click("button", "Upvote" if up else "Downvote"), DONE],
            },
        )


@template("forum", "modify", "edit_title", "Rename my forum post “{{title}}” to “{{new_title}}”.")
def t_edit(db, rng):
    for p in posts(db, rng):
        new = p["title"].rstrip("?") + " (updated)"
        yield (
            {"title": p["title"], "new_title": new},
            {
                "login": {"forum": p["author"]},
                "eval": db_eval(
                    "forum", "SELECT title FROM posts WHERE id = ?", [p["id"]], new, "post title"
                ),
                "expert": [
                    *search_post(p["title"]),
                    click("link", "Edit post"),
                    fill("textbox", "Title", new),
                    click("button", "Save changes"),
                    DONE,
                ],
            },
        )


# --- admin --------------------------------------------------------------------------------------
ADMIN_LOGIN = {"admin": ADMIN_USER}


def orders(db: sqlite3.Connection, rng: random.Random) -> list[sqlite3.Row]:
    return rng.sample(
        db.execute(
            "SELECT o.*, c.name AS customer FROM orders o JOIN customers c ON c.id = o.customer_id "
            "ORDER BY o.id"
        ).fetchall(),
        PER_TEMPLATE,
    )


@template("admin", "info", "order_total", "In the admin panel, what is the total of order #{{order_id}}?")
def t_admin_total(db, rng):
    for o in orders(db, rng):
        yield (
            {"order_id": str(o["id"])},
            {
                "login": ADMIN_LOGIN,
                "eval": exact(money(o["total"])),
                "expert": [goto(f"__ADMIN__/orders/{o['id']}"), answer(extract=r"Order total: (\$[\d,.]+)")],
            },
        )


@template("admin", "info", "order_customer", "Which customer placed order #{{order_id}}?")
def t_admin_customer(db, rng):
    for o in orders(db, rng):
        yield (
            {"order_id": str(o["id"])},
            {
                "login": ADMIN_LOGIN,
                "eval": exact(o["customer"]),
                "expert": [
                    goto(f"__ADMIN__/orders/{o['id']}"),
                    answer(extract=r'text: "?Customer:"?\n\s*\[\w+\] link "([^"]+)"'),
                ],
            },
        )


@template("admin", "info", "status_count", "How many orders currently have the status “{{status}}”?")
def t_status_count(db, rng):
    for i in range(PER_TEMPLATE):
        s = ORDER_STATUSES[i % len(ORDER_STATUSES)]
        n = db.execute("SELECT COUNT(*) FROM orders WHERE status = ?", (s,)).fetchone()[0]
        yield (
            {"status": s},
            {
                "login": ADMIN_LOGIN,
                "eval": exact(str(n)),
                "expert": [
                    click("link", "Orders"),
                    select("Status", s),
                    click("button", "Filter orders"),
                    answer(extract=r"(\d+) orders found"),
                ],
            },
        )


@template("admin", "info", "customer_email", "What is the email address of the customer {{customer}}?")
def t_email(db, rng):
    for c in shoppers(db, rng):
        yield (
            {"customer": c["name"]},
            {
                "login": ADMIN_LOGIN,
                "eval": exact(c["email"]),
                "expert": [
                    click("link", "Customers"),
                    fill("textbox", "Find customer", c["name"]),
                    click("button", "Find"),
                    answer(extract=r'cell "([^"]+@example\.com)"'),
                ],
            },
        )


@template(
    "admin", "info", "month_revenue", "According to the sales report, what was the revenue in {{month}}?"
)
def t_revenue(db, rng):
    months = [r[0] for r in db.execute("SELECT DISTINCT substr(created, 1, 7) FROM orders ORDER BY 1")]
    for m in rng.sample(months, PER_TEMPLATE):
        rev = db.execute(
            "SELECT ROUND(SUM(total), 2) FROM orders WHERE status != 'cancelled' AND substr(created, 1, 7) = ?",
            (m,),
        ).fetchone()[0]
        yield (
            {"month": m},
            {
                "login": ADMIN_LOGIN,
                "eval": exact(money(rev)),
                "expert": [
                    click("link", "Sales report"),
                    answer(extract=rf'cell "{m}"[^\n]*\n[^\n]*cell "\d+"[^\n]*\n[^\n]*cell "(\$[\d,.]+)"'),
                ],
            },
        )


@template("admin", "info", "customer_spend", "What is the lifetime spend of the customer {{customer}}?")
def t_spend(db, rng):
    for c in customers_with_orders(db, rng):
        spent = db.execute(
            "SELECT COALESCE(SUM(total), 0) FROM orders WHERE customer_id = ? AND status != 'cancelled'",
            (c["id"],),
        ).fetchone()[0]
        yield (
            {"customer": c["name"]},
            {
                "login": ADMIN_LOGIN,
                "eval": exact(money(spent)),
                "expert": [
                    click("link", "Customers"),
                    fill("textbox", "Find customer", c["name"]),
                    click("button", "Find"),
                    click("link", c["name"]),
                    answer(extract=r"Lifetime spend: (\$[\d,.]+)"),
                ],
            },
        )


@template("admin", "nav", "orders_filtered", "Show the {{status}} orders sorted by total, smallest first.")
def t_orders_filtered(db, rng):
    for i in range(PER_TEMPLATE):
        s = ORDER_STATUSES[(i * 3) % len(ORDER_STATUSES)]
        yield (
            {"status": s},
            {
                "login": ADMIN_LOGIN,
                "eval": url_eval(f"__ADMIN__/orders?status={s}&sort=total&dir=asc"),
                "expert": [
                    click("link", "Orders"),
                    select("Status", s),
                    select("Sort by", "total"),
                    select("Direction", "ascending"),
                    click("button", "Filter orders"),
                    DONE,
                ],
            },
        )


@template("admin", "nav", "edit_product_page", "Open the admin edit page of the product with SKU {{sku}}.")
def t_edit_page(db, rng):
    for p in products(db, rng):
        yield (
            {"sku": p["sku"]},
            {
                "login": ADMIN_LOGIN,
                "eval": url_eval(f"__ADMIN__/products/{p['id']}/edit"),
                "expert": [
                    click("link", "Products"),
                    fill("textbox", "Find product", p["sku"]),
                    click("button", "Find"),
                    click("link", p["name"]),
                    DONE,
                ],
            },
        )


@template("admin", "nav", "customer_page", "Open the admin page of the customer {{customer}}.")
def t_customer_page(db, rng):
    for c in shoppers(db, rng):
        yield (
            {"customer": c["name"]},
            {
                "login": ADMIN_LOGIN,
                "eval": url_eval(f"__ADMIN__/customers/{c['id']}"),
                "expert": [
                    click("link", "Customers"),
                    fill("textbox", "Find customer", c["name"]),
                    click("button", "Find"),
                    click("link", c["name"]),
                    DONE,
                ],
            },
        )


def edit_product(p: sqlite3.Row) -> list[dict]:
    return [
        click("link", "Products"),
        fill("textbox", "Find product", p["sku"]),
        click("button", "Find"),
        click("link", p["name"]),
    ]


@template("admin", "modify", "set_price", "Change the price of the product {{sku}} to ${{price}}.")
def t_set_price(db, rng):
    for p in products(db, rng):
        price = f"{round(p['price'] * rng.choice([0.8, 0.9, 1.1, 1.25]), 2):.2f}"
        yield (
            {"sku": p["sku"], "price": price},
            {
                "login": ADMIN_LOGIN,
                "eval": db_eval(
                    "shop",
                    "SELECT printf('%.2f', price) FROM products WHERE id = ?",
                    [p["id"]],
                    price,
                    "price",
                ),
                "expert": [
                    *edit_product(p),
                    fill("textbox", "Price", price),
                    click("button", "Save product"),
                    DONE,
                ],
            },
        )


@template("admin", "modify", "set_stock", "Set the stock of the product {{sku}} to {{stock}} units.")
def t_set_stock(db, rng):
    for p in products(db, rng):
        stock = rng.randint(0, 300)
        yield (
            {"sku": p["sku"], "stock": str(stock)},
            {
                "login": ADMIN_LOGIN,
                "eval": db_eval("shop", "SELECT stock FROM products WHERE id = ?", [p["id"]], stock, "stock"),
                "expert": [
                    *edit_product(p),
                    fill("textbox", "Stock", str(stock)),
                    click("button", "Save product"),
                    DONE,
                ],
            },
        )


@template(
    "admin",
    "modify",
    "disable_product",
    "Disable the product {{sku}} so that it no longer shows in the shop.",
)
def t_disable(db, rng):
    for p in products(db, rng):
        yield (
            {"sku": p["sku"]},
            {
                "login": ADMIN_LOGIN,
                "eval": db_eval(
                    "shop", "SELECT enabled FROM products WHERE id = ?", [p["id"]], 0, "enabled flag"
                ),
                "expert": [
                    *edit_product(p),
                    {"op": "uncheck", "role": "checkbox", "name": "Enabled"},
                    click("button", "Save product"),
                    DONE,
                ],
            },
        )


@template("admin", "modify", "set_order_status", "Mark order #{{order_id}} as {{status}}.")
def t_set_status(db, rng):
    for o in orders(db, rng):
        s = rng.choice([x for x in ORDER_STATUSES if x != o["status"]])
        yield (
            {"order_id": str(o["id"]), "status": s},
            {
                "login": ADMIN_LOGIN,
                "eval": db_eval(
                    "shop",
                    "SELECT status FROM orders WHERE id = ?",
                    [o["id"]],
                    s,
                    "order status",
                    html=[
                        {
                            "url": "last",
                            "locator": "",
                            "required_contents": {"must_include": [f"Status: {s}"]},
                        }
                    ],
                ),
                "expert": [
                    goto(f"__ADMIN__/orders/{o['id']}"),
                    select("New status", s),
                    click("button", "Update status"),
                    DONE,
                ],
            },
        )


def render_intent(tpl: str, inst: dict[str, str]) -> str:
    out = tpl
    for k, v in inst.items():
        out = out.replace("{{" + k + "}}", v)
    return out


def generate(data_dir: Path) -> list[Task]:
    """Every task instance, in template order."""
    dbs = {"shop": data_dir / "shop.db", "forum": data_dir / "forum.db", "admin": data_dir / "shop.db"}
    tasks: list[Task] = []
    for tid, (site, kind, key, intent, fn) in enumerate(TEMPLATES):
        con = sqlite3.connect(f"file:{dbs[site]}?mode=ro", uri=True)
        con.row_factory = sqlite3.Row
        rng = random.Random(f"{key}-{tid}")
        for i, (inst, extra) in enumerate(fn(con, rng)):
            login = extra.pop("login", None)
            task = {
                "sites": [site],
                "task_id": f"{site}.{key}.{i}",
                "require_login": bool(login),
                "login": login or {},
                "storage_state": None,
                "start_url": f"__{site.upper()}__/",
                "geolocation": None,
                "intent_template": intent,
                "instantiation_dict": inst,
                "intent": render_intent(intent, inst),
                "require_reset": kind == "modify",
                "intent_template_id": tid,
                "kind": kind,
                "split": "test" if i % TEST_EVERY == TEST_EVERY - 1 else "train",
                **extra,
            }
            tasks.append(task)
        con.close()
    return tasks


def main() -> None:
    from lynn.envs.liveweb.sites.server import pristine_dir

    tasks = generate(pristine_dir())
    OUT.write_text(json.dumps(tasks, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    kinds: dict[str, int] = {}
    for t in tasks:
        kinds[f"{t['sites'][0]}/{t['kind']}"] = kinds.get(f"{t['sites'][0]}/{t['kind']}", 0) + 1
    print(f"{len(TEMPLATES)} templates, {len(tasks)} tasks -> {OUT}: {kinds}")


if __name__ == "__main__":
    main()
