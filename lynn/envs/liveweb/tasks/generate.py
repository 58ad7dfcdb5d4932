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
from lynn.envs.liveweb.tasks.guesses import BASE_GUESSES, PageReader

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


def parts(*readings: dict) -> dict:
    """An answer step made of several readings of the page (see :func:`lynn.agents.web_expert.read_parts`)."""
    return {"op": "answer", "parts": list(readings)}


def exact(v: str) -> dict:
    return {"eval_types": ["string_match"], "reference_answers": {"exact_match": v}}


def includes(*v: str) -> dict:
    return {"eval_types": ["string_match"], "reference_answers": {"must_include": list(v)}}


LISTED = "main tbody tr, main li"
LISTING_CONTEXT = "main h1, main p, main nav span"


def url_eval(url: str) -> dict:
    """A page to reach. A URL with a query is a listing (filtered, sorted, paged, searched): it is
    checked by what the page lists (``page_list``), which no other URL showing other results passes."""
    if "?" in url:
        return {
            "eval_types": ["page_list"],
            "page_list": {"reference_url": url, "locator": LISTED, "also": LISTING_CONTEXT, "min_items": 1},
        }
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


@template(
    "shop", "info", "product_reviews", "How many reviews does the {{product}} have, and who wrote them?"
)
def t_reviews(db, rng):
    for p in products(db, rng):
        names = [
            r[0]
            for r in db.execute(
                "SELECT DISTINCT c.name FROM reviews r JOIN customers c ON c.id = r.customer_id "
                "WHERE r.product_id = ? ORDER BY c.name",
                (p["id"],),
            )
        ]
        n = db.execute("SELECT COUNT(*) FROM reviews WHERE product_id = ?", (p["id"],)).fetchone()[0]
        yield (
            {"product": p["name"]},
            {
                "eval": includes(str(n), *names),
                "expert": [
                    *search_product(p["name"]),
                    parts({"extract": r"\((\d+) reviews?\)"}, {"all": r'article "Review by ([^"]+)"'}),
                ],
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
    "How many products in the {{category}} category cost at most ${{max_price}}, and which of them is the "
    "most expensive?",
)
def t_cat_count(db, rng):
    cats = db.execute("SELECT * FROM categories ORDER BY id").fetchall()
    for c, limit in rng.sample([(c, m) for c in cats for m in (20, 30, 40, 50, 75, 100)], PER_TEMPLATE):
        where = "FROM products WHERE category_id = ? AND price <= ? AND enabled = 1"
        n = db.execute(f"SELECT COUNT(*) {where}", (c["id"], limit)).fetchone()[0]
        top = db.execute(f"SELECT name {where} ORDER BY price DESC, id LIMIT 1", (c["id"], limit)).fetchone()
        yield (
            {"category": c["name"], "max_price": str(limit)},
            {
                "eval": includes(str(n), *([top[0]] if top else [])),
                "expert": [
                    click("link", c["name"]),
                    fill("textbox", "Max price", str(limit)),
                    select("Sort by", "price_desc"),
                    click("button", "Apply filters"),
                    parts(
                        {"extract": r"(\d+) products? found"},
                        {"extract": r'link "([^"]+)"', "after": 'table "Products"'},
                    ),
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


@template(
    "shop", "info", "my_order_status", "What is the status of my order #{{order_id}}, and what was its total?"
)
def t_order_status(db, rng):
    for c in customers_with_orders(db, rng):
        o = rng.choice(
            db.execute("SELECT * FROM orders WHERE customer_id = ? ORDER BY id", (c["id"],)).fetchall()
        )
        yield (
            {"order_id": str(o["id"])},
            {
                "login": {"shop": c["username"]},
                "eval": includes(o["status"], money(o["total"])),
                "expert": [
                    click("link", "My account"),
                    click("link", "My orders"),
                    click("link", f"Order #{o['id']}"),
                    parts({"extract": r"Status: (\w+)"}, {"extract": r"Order total: (\$[\d,.]+)"}),
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


@template(
    "shop", "info", "my_order_count", "How many orders have I placed in total, and what are their numbers?"
)
def t_order_count(db, rng):
    for c in customers_with_orders(db, rng):
        ids = [str(r[0]) for r in db.execute("SELECT id FROM orders WHERE customer_id = ?", (c["id"],))]
        yield (
            {"customer": c["username"]},
            {
                "login": {"shop": c["username"]},
                "eval": includes(str(len(ids)), *ids),
                "expert": [
                    click("link", "My account"),
                    click("link", "My orders"),
                    parts({"count": r'link "Order #\d+"'}, {"all": r'link "Order #(\d+)"'}),
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
    for c, s in rng.sample([(c, s) for c in cats for s in sorted(sorts)], PER_TEMPLATE):
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


@template(
    "forum",
    "info",
    "post_comments",
    "How many comments does the forum post “{{title}}” have, and who wrote them?",
)
def t_comments(db, rng):
    for p in posts(db, rng):
        names = [
            r[0]
            for r in db.execute(
                "SELECT DISTINCT u.username FROM comments c JOIN users u ON u.id = c.user_id "
                "WHERE c.post_id = ? ORDER BY 1",
                (p["id"],),
            )
        ]
        yield (
            {"title": p["title"]},
            {
                "eval": includes(str(p["n_comments"]), *names),
                "expert": [
                    *search_post(p["title"]),
                    parts({"extract": r"(\d+) comments"}, {"all": r'article "Comment by ([^"]+)"'}),
                ],
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


@template(
    "forum",
    "info",
    "post_score",
    "What is the score of the forum post “{{title}}”, and on what date was it posted?",
)
def t_score(db, rng):
    for p in posts(db, rng):
        yield (
            {"title": p["title"]},
            {
                "eval": includes(str(p["score"]), p["created"][:10]),
                "expert": [
                    *search_post(p["title"]),
                    parts({"extract": r"Score: (-?\d+)"}, {"extract": r"on (\d{4}-\d\d-\d\d)"}),
                ],
            },
        )


@template(
    "forum",
    "info",
    "subforum_count",
    "How many posts are there in f/{{forum}}, and what is the newest one called?",
)
def t_sub_count(db, rng):
    subs = db.execute("SELECT * FROM subforums ORDER BY id").fetchall()
    for s in rng.sample(subs, PER_TEMPLATE):
        n = db.execute("SELECT COUNT(*) FROM posts WHERE subforum_id = ?", (s["id"],)).fetchone()[0]
        newest = db.execute(
            "SELECT title FROM posts WHERE subforum_id = ? ORDER BY created DESC, id DESC LIMIT 1", (s["id"],)
        ).fetchone()[0]
        yield (
            {"forum": s["name"]},
            {
                "eval": includes(str(n), newest),
                "expert": [
                    click("link", f"f/{s['name']}"),
                    parts(
                        {"extract": r"(\d+) posts"}, {"extract": r'link "([^"]+)"', "after": 'table "Posts"'}
                    ),
                ],
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
    for s, sort in rng.sample([(s, o) for s in subs for o in ("top", "comments", "new")], PER_TEMPLATE):
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
                    html=[
                        {
                            "url": "last",
                            "locator": "document.querySelector('h1').outerText",
                            "required_contents": {"exact_match": title},
                        }
                    ],
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
    pairs = [
        (u, p)
        for u in db.execute("SELECT * FROM users ORDER BY id")
        for p in db.execute(FORUM_POST + " ORDER BY p.id")
    ]
    seen: set[tuple[int, int]] = set()
    while len(seen) < PER_TEMPLATE:
        u, p = rng.choice(pairs)
        up = rng.random() < 0.6
        had = db.execute(
            "SELECT value FROM votes WHERE user_id = ? AND post_id = ?", (u["id"], p["id"])
        ).fetchone()
        if (u["id"], p["id"]) in seen or (had is not None and had[0] == (1 if up else -1)):
            continue  # the seeded vote would already be the goal state
        seen.add((u["id"], p["id"]))
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


@template(
    "admin",
    "info",
    "status_count",
    "How many orders currently have the status “{{status}}”, and which of them has the highest order number?",
)
def t_status_count(db, rng):
    for s in ORDER_STATUSES:
        n, top = db.execute("SELECT COUNT(*), MAX(id) FROM orders WHERE status = ?", (s,)).fetchone()
        yield (
            {"status": s},
            {
                "login": ADMIN_LOGIN,
                "eval": includes(str(n), f"#{top}"),
                "expert": [
                    click("link", "Orders"),
                    select("Status", s),
                    click("button", "Filter orders"),
                    parts(
                        {"extract": r"(\d+) orders found"},
                        {"extract": r'link "(#\d+)"', "after": 'table "Orders grid"'},
                    ),
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


@template("admin", "nav", "orders_filtered", "Show the {{status}} orders sorted by total, {{order}} first.")
def t_orders_filtered(db, rng):
    combos = [(s, d) for s in ORDER_STATUSES for d in ("asc", "desc")]
    for s, d in rng.sample(combos, PER_TEMPLATE):
        yield (
            {"status": s, "order": "smallest" if d == "asc" else "largest"},
            {
                "login": ADMIN_LOGIN,
                "eval": url_eval(f"__ADMIN__/orders?status={s}&sort=total&dir={d}"),
                "expert": [
                    click("link", "Orders"),
                    select("Status", s),
                    select("Sort by", "total"),
                    select("Direction", "ascending" if d == "asc" else "descending"),
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


# --- more templates (second batch) --------------------------------------------------------------
SHOP_RATED = """SELECT p.*, (SELECT ROUND(AVG(rating), 1) FROM reviews r WHERE r.product_id = p.id) AS rating
  FROM products p WHERE p.category_id = ? AND p.enabled = 1 ORDER BY rating DESC, p.id LIMIT 1"""


@template(
    "shop", "info", "product_stock", "How many units of the {{product}} are in stock, and what does one cost?"
)
def t_stock(db, rng):
    for p in products(db, rng):
        yield (
            {"product": p["name"]},
            {
                "eval": includes(str(p["stock"]), money(p["price"])),
                "expert": [
                    *search_product(p["name"]),
                    parts({"extract": r"Stock: (\d+) available"}, {"extract": r"Price: (\$[\d,.]+)"}),
                ],
            },
        )


@template("shop", "info", "product_category", "In which category does the shop list the {{product}}?")
def t_category_of(db, rng):
    for p in products(db, rng):
        yield (
            {"product": p["name"]},
            {
                "eval": exact(p["category"]),
                "expert": [
                    *search_product(p["name"]),
                    answer(extract=r'text: "?Category:"?\n\s*\[\w+\] link "([^"]+)"'),
                ],
            },
        )


@template(
    "shop",
    "info",
    "category_top_rated",
    "Which product has the best customer rating in the {{category}} category?",
)
def t_top_rated(db, rng):
    cats = db.execute("SELECT * FROM categories ORDER BY id").fetchall()
    for c in rng.sample(cats, PER_TEMPLATE):
        p = db.execute(SHOP_RATED, (c["id"],)).fetchone()
        yield (
            {"category": c["name"]},
            {
                "eval": exact(p["name"]),
                "expert": [
                    click("link", c["name"]),
                    select("Sort by", "rating"),
                    click("button", "Apply filters"),
                    answer(extract=r'link "([^"]+)"', after='table "Products"'),
                ],
            },
        )


@template("shop", "info", "wishlist_count", "How many products are on my wishlist, and which are they?")
def t_wishlist_count(db, rng):
    rows = db.execute(
        "SELECT c.*, (SELECT COUNT(*) FROM wishlist w WHERE w.customer_id = c.id) AS n "
        "FROM customers c ORDER BY c.id"
    ).fetchall()
    names: dict[int, list[str]] = {}
    for cid, name in db.execute(
        "SELECT w.customer_id, p.name FROM wishlist w JOIN products p ON p.id = w.product_id ORDER BY w.id"
    ):
        names.setdefault(cid, []).append(name)
    for c in rng.sample(rows, PER_TEMPLATE):
        names.setdefault(c["id"], [])
        yield (
            {"customer": c["username"]},
            {
                "login": {"shop": c["username"]},
                "eval": includes(str(c["n"]), *names[c["id"]]),
                "expert": [
                    click("link", "Wishlist"),
                    parts(
                        {"count": r'button "Remove .* from wishlist"'},
                        {"all": r'button "Remove (.*) from wishlist"'},
                    ),
                ],
            },
        )


@template("shop", "nav", "cart_page", "Open my shopping cart.")
def t_cart_page(db, rng):
    for c in shoppers(db, rng):
        yield (
            {"customer": c["username"]},
            {
                "login": {"shop": c["username"]},
                "eval": url_eval("__SHOP__/cart"),
                "expert": [click("link", "Cart (0)"), DONE],
            },
        )


@template(
    "shop",
    "nav",
    "category_price_range",
    "Show the {{category}} products priced between ${{low}} and ${{high}}.",
)
def t_price_range(db, rng):
    cats = db.execute("SELECT * FROM categories ORDER BY id").fetchall()
    combos = [
        (c, low, low + w)
        for c in cats
        for low in (5, 10, 20, 30)
        for w in (10, 20, 50)
        if db.execute(  # a range that lists nothing would be passed by any empty listing
            "SELECT COUNT(*) FROM products WHERE category_id = ? AND price >= ? AND price <= ? AND enabled = 1",
            (c["id"], low, low + w),
        ).fetchone()[0]
    ]
    for c, low, high in rng.sample(combos, PER_TEMPLATE):
        yield (
            {"category": c["name"], "low": str(low), "high": str(high)},
            {
                "eval": url_eval(f"__SHOP__/category/{c['slug']}?min_price={low}&max_price={high}"),
                "expert": [
                    click("link", c["name"]),
                    fill("textbox", "Min price", str(low)),
                    fill("textbox", "Max price", str(high)),
                    click("button", "Apply filters"),
                    DONE,
                ],
            },
        )


@template("shop", "modify", "remove_from_wishlist", "Remove the {{product}} from my wishlist.")
def t_unwish(db, rng):
    rows = db.execute(
        "SELECT c.id AS cid, c.username, p.id AS pid, p.name FROM wishlist w JOIN customers c "
        "ON c.id = w.customer_id JOIN products p ON p.id = w.product_id ORDER BY w.id"
    ).fetchall()
    for r in rng.sample(rows, PER_TEMPLATE):
        yield (
            {"product": r["name"]},
            {
                "login": {"shop": r["username"]},
                "eval": db_eval(
                    "shop",
                    "SELECT COUNT(*) FROM wishlist WHERE customer_id = ? AND product_id = ?",
                    [r["cid"], r["pid"]],
                    0,
                    "product no longer in wishlist",
                ),
                "expert": [
                    click("link", "Wishlist"),
                    click("button", f"Remove {r['name']} from wishlist"),
                    DONE,
                ],
            },
        )


@template("shop", "modify", "add_two_to_cart", "Put one {{first}} and one {{second}} in my cart.")
def t_add_two(db, rng):
    for c in shoppers(db, rng):
        a, b = products(db, rng, 2)
        yield (
            {"first": a["name"], "second": b["name"]},
            {
                "login": {"shop": c["username"]},
                "eval": db_eval(
                    "shop",
                    "SELECT COUNT(*) FROM cart_items WHERE customer_id = ? AND qty = 1 AND "
                    "product_id IN (?, ?)",
                    [c["id"], a["id"], b["id"]],
                    2,
                    "both products in the cart",
                ),
                "expert": [
                    *search_product(a["name"]),
                    click("button", "Add to cart"),
                    *search_product(b["name"]),
                    click("button", "Add to cart"),
                    DONE,
                ],
            },
        )


@template(
    "forum", "info", "user_karma", "What is the karma of the forum user {{user}}, and when did they join?"
)
def t_karma(db, rng):
    for u in forum_users(db, rng):
        karma = db.execute(
            "SELECT COALESCE(SUM(v.value), 0) FROM votes v JOIN posts p ON p.id = v.post_id "
            "WHERE p.user_id = ?",
            (u["id"],),
        ).fetchone()[0]
        yield (
            {"user": u["username"]},
            {
                "eval": includes(str(karma), u["joined"]),
                "expert": [
                    goto(f"__FORUM__/user/{u['username']}"),
                    parts({"extract": r"Karma: (-?\d+)"}, {"extract": r"Joined: (\d{4}-\d\d-\d\d)"}),
                ],
            },
        )


@template(
    "forum",
    "info",
    "user_post_count",
    "How many posts has the forum user {{user}} written, and what is the most recent one called?",
)
def t_user_posts(db, rng):
    for u in forum_users(db, rng):
        n = db.execute("SELECT COUNT(*) FROM posts WHERE user_id = ?", (u["id"],)).fetchone()[0]
        last = db.execute(
            "SELECT title FROM posts WHERE user_id = ? ORDER BY created DESC LIMIT 1", (u["id"],)
        ).fetchone()
        yield (
            {"user": u["username"]},
            {
                "eval": includes(str(n), *([last[0]] if last else [])),
                "expert": [
                    goto(f"__FORUM__/user/{u['username']}"),
                    parts(
                        {"extract": r"Posts: (\d+)"},
                        {"extract": r'link "([^"]+)"', "after": 'heading "Posts by'},
                    ),
                ],
            },
        )


@template("forum", "info", "most_commented", "Which post in f/{{forum}} has the most comments?")
def t_most_commented(db, rng):
    subs = db.execute("SELECT * FROM subforums ORDER BY id").fetchall()
    for s in rng.sample(subs, PER_TEMPLATE):
        top = db.execute(
            FORUM_POST + " WHERE p.subforum_id = ? ORDER BY n_comments DESC, p.id DESC LIMIT 1", (s["id"],)
        ).fetchone()
        yield (
            {"forum": s["name"]},
            {
                "eval": exact(top["title"]),
                "expert": [
                    click("link", f"f/{s['name']}"),
                    click("link", "comments"),
                    answer(extract=r'link "([^"]+)"', after='table "Posts"'),
                ],
            },
        )


@template("forum", "nav", "subforum_page_two", "Show the second page of f/{{forum}} sorted by {{sort}}.")
def t_page_two(db, rng):
    subs = db.execute(
        "SELECT s.* FROM subforums s WHERE (SELECT COUNT(*) FROM posts p WHERE p.subforum_id = s.id) > 20 "
        "ORDER BY s.id"
    ).fetchall()
    for s, sort in [(s, o) for s in subs for o in ("new", "top", "comments")]:
        yield (
            {"forum": s["name"], "sort": sort},
            {
                "eval": url_eval(f"__FORUM__/f/{s['name']}?sort={sort}&page=2"),
                "expert": [
                    click("link", f"f/{s['name']}"),
                    click("link", sort),
                    click("link", "Next page"),
                    DONE,
                ],
            },
        )


@template("forum", "nav", "search_forum", "Search the forum for posts about “{{query}}”.")
def t_search_forum(db, rng):
    from lynn.envs.liveweb.sites.seed import TOPIC_WORDS

    words = sorted({w for ws in TOPIC_WORDS.values() for w in ws})
    for q in rng.sample(words, PER_TEMPLATE):
        yield (
            {"query": q},
            {
                "eval": url_eval(f"__FORUM__/search?q={q}"),
                "expert": [fill("textbox", "Search posts", q), click("button", "Search"), DONE],
            },
        )


@template("forum", "modify", "edit_body", "Change the text of my forum post “{{title}}” to “{{body}}”.")
def t_edit_body(db, rng):
    bodies = ["Edit: solved, thanks everyone!", "Update: see the comments.", "Edited for clarity."]
    for p in posts(db, rng):
        body = rng.choice(bodies)
        yield (
            {"title": p["title"], "body": body},
            {
                "login": {"forum": p["author"]},
                "eval": db_eval(
                    "forum",
                    "SELECT body FROM posts WHERE id = ?",
                    [p["id"]],
                    body,
                    "post body",
                    html=[{"url": "last", "locator": "", "required_contents": {"must_include": [body]}}],
                ),
                "expert": [
                    *search_post(p["title"]),
                    click("link", "Edit post"),
                    fill("textbox", "Body", body),
                    click("button", "Save changes"),
                    DONE,
                ],
            },
        )


@template(
    "admin",
    "info",
    "order_lines",
    "How many different products are in order #{{order_id}}, and which are they?",
)
def t_order_lines(db, rng):
    item = r'cell "[A-Z&]{2}-\d+"\n\s*\[\w+\] cell "([^"]+)"'
    for o in orders(db, rng):
        names = [
            r[0]
            for r in db.execute(
                "SELECT DISTINCT p.name FROM order_items i JOIN products p ON p.id = i.product_id "
                "WHERE i.order_id = ? ORDER BY 1",
                (o["id"],),
            )
        ]
        yield (
            {"order_id": str(o["id"])},
            {
                "login": ADMIN_LOGIN,
                "eval": includes(str(len(names)), *names),
                "expert": [
                    goto(f"__ADMIN__/orders/{o['id']}"),
                    parts({"count": item, "after": 'table "Items"'}, {"all": item, "after": 'table "Items"'}),
                ],
            },
        )


@template("admin", "info", "order_date", "On what date was order #{{order_id}} placed?")
def t_order_date(db, rng):
    for o in orders(db, rng):
        yield (
            {"order_id": str(o["id"])},
            {
                "login": ADMIN_LOGIN,
                "eval": exact(o["created"]),
                "expert": [goto(f"__ADMIN__/orders/{o['id']}"), answer(extract=r"Date: (\d{4}-\d\d-\d\d)")],
            },
        )


@template(
    "admin", "info", "best_seller_rank", "Which product is number {{rank}} on the 2025 best-seller list?"
)
def t_best_seller(db, rng):
    best = db.execute(
        "SELECT p.name FROM order_items oi JOIN orders o ON o.id = oi.order_id JOIN products p ON p.id = oi.product_id "
        "WHERE o.status != 'cancelled' AND substr(o.created, 1, 4) = '2025' GROUP BY p.id "
        "ORDER BY SUM(oi.qty) DESC, p.id LIMIT 5"
    ).fetchall()
    for rank in range(1, 6):
        skip = "".join([r"listitem: .+\n\s*(?:\[\w+\] )?"] * (rank - 1))
        yield (
            {"rank": str(rank)},
            {
                "login": ADMIN_LOGIN,
                "eval": exact(best[rank - 1][0]),
                "expert": [
                    click("link", "Sales report"),
                    answer(extract=skip + r"listitem: (.+?) \(\d+ units\)", after='heading "Best sellers"'),
                ],
            },
        )


@template(
    "admin",
    "info",
    "customer_order_count",
    "How many orders has the customer {{customer}} placed, and what is their email address?",
)
def t_customer_orders(db, rng):
    for c in shoppers(db, rng):
        n = db.execute("SELECT COUNT(*) FROM orders WHERE customer_id = ?", (c["id"],)).fetchone()[0]
        yield (
            {"customer": c["name"]},
            {
                "login": ADMIN_LOGIN,
                "eval": includes(str(n), c["email"]),
                "expert": [
                    click("link", "Customers"),
                    fill("textbox", "Find customer", c["name"]),
                    click("button", "Find"),
                    parts(
                        {"extract": r'cell "(\d+)"', "after": f'link "{c["name"]}"'},
                        {"extract": r'cell "([^"]+@example\.com)"', "after": f'link "{c["name"]}"'},
                    ),
                ],
            },
        )


@template("admin", "nav", "orders_of_customer", "Show the orders grid filtered to the customer {{customer}}.")
def t_orders_of(db, rng):
    for c in shoppers(db, rng):
        yield (
            {"customer": c["name"]},
            {
                "login": ADMIN_LOGIN,
                "eval": url_eval(f"__ADMIN__/orders?customer={c['name']}"),
                "expert": [
                    click("link", "Orders"),
                    fill("textbox", "Customer name", c["name"]),
                    click("button", "Filter orders"),
                    DONE,
                ],
            },
        )


@template("admin", "nav", "orders_in_month", "Show the orders placed in {{month_name}} 2025, newest first.")
def t_orders_month(db, rng):
    import calendar

    for m in rng.sample(range(1, 12), PER_TEMPLATE):
        last = calendar.monthrange(2025, m)[1]
        lo, hi = f"2025-{m:02d}-01", f"2025-{m:02d}-{last:02d}"
        yield (
            {"month_name": calendar.month_name[m]},
            {
                "login": ADMIN_LOGIN,
                "eval": url_eval(f"__ADMIN__/orders?date_from={lo}&date_to={hi}&sort=date&dir=desc"),
                "expert": [
                    click("link", "Orders"),
                    fill("textbox", "From date", lo),
                    fill("textbox", "To date", hi),
                    select("Sort by", "date"),
                    select("Direction", "descending"),
                    click("button", "Filter orders"),
                    DONE,
                ],
            },
        )


@template("admin", "modify", "rename_product", "Rename the product {{sku}} to “{{name}}”.")
def t_rename(db, rng):
    for p in products(db, rng):
        name = p["name"] + " (2026 edition)"
        yield (
            {"sku": p["sku"], "name": name},
            {
                "login": ADMIN_LOGIN,
                "eval": db_eval(
                    "shop", "SELECT name FROM products WHERE id = ?", [p["id"]], name, "product name"
                ),
                "expert": [
                    *edit_product(p),
                    fill("textbox", "Name", name),
                    click("button", "Save product"),
                    DONE,
                ],
            },
        )


@template(
    "admin",
    "modify",
    "price_and_stock",
    "Set the product {{sku}} to ${{price}} with {{stock}} units in stock.",
)
def t_price_stock(db, rng):
    for p in products(db, rng):
        price, stock = f"{rng.randint(5, 200)}.{rng.choice(['00', '49', '99'])}", rng.randint(1, 99)
        yield (
            {"sku": p["sku"], "price": price, "stock": str(stock)},
            {
                "login": ADMIN_LOGIN,
                "eval": db_eval(
                    "shop",
                    "SELECT printf('%.2f/%d', price, stock) FROM products WHERE id = ?",
                    [p["id"]],
                    f"{price}/{stock}",
                    "price and stock",
                ),
                "expert": [
                    *edit_product(p),
                    fill("textbox", "Price", price),
                    fill("textbox", "Stock", str(stock)),
                    click("button", "Save product"),
                    DONE,
                ],
            },
        )


def render_intent(tpl: str, inst: dict[str, str]) -> str:
    out = tpl
    for k, v in inst.items():
        out = out.replace("{{" + k + "}}", v)
    return out


GENERIC_ANSWERS = ("", "done", "yes", "no", "N/A", "none", "0", "1", "true", "false")
MAX_GUESS_RATE = 0.01  # no constant answer may pass more than 1% of the instances of a split


def passes_unearned(extra: Task, dbs: dict[str, Path], reader: PageReader | None = None) -> str | None:
    """Why an instance would score without the agent doing the task, or is broken, or ``None``.

    Unearned: its goal state already holds in the seed data, or a guess passes (:data:`.guesses.BASE_GUESSES`).
    Broken (needs a ``reader``): the page a navigation task wants does not answer or lists nothing.
    What the start page shows is checked by :func:`page_guesses_passing` (one of its texts may be the
    answer of one instance of a template, as a category name is, but not of two).
    """
    from lynn.envs.liveweb.evaluators import EvalContext, evaluate

    spec = extra["eval"]
    types = spec["eval_types"]
    if "db_check" in types and "program_html" not in types:
        if evaluate({"eval": spec}, EvalContext(db=dbs))[0] > 0:
            return "goal state already in the seed data"
    if "string_match" in types:
        for a in sorted(set(BASE_GUESSES) | set(GENERIC_ANSWERS)):
            if evaluate({"eval": spec}, EvalContext(answer=a))[0] > 0:
                return f"the guess {a!r} passes"
    if reader is not None and ({"url_match", "page_list"} & set(types)):
        return reader.page_problem(extra)
    return None


def page_guesses_passing(extra: Task, reader: PageReader) -> set[str]:
    """The texts and numbers of the instance's start page that pass it as answers."""
    from lynn.envs.liveweb.evaluators import EvalContext, evaluate

    if "string_match" not in extra["eval"]["eval_types"]:
        return set()
    return {
        a
        for a in reader.start_page_guesses(extra)
        if evaluate({"eval": extra["eval"]}, EvalContext(answer=a))[0] > 0
    }


def guess_pass_counts(tasks: list[Task], reader: PageReader) -> dict[str, dict[str, int]]:
    """split -> guess -> how many of the split's answer tasks the guess passes (guesses that pass any).

    Each guess is tried on every instance: the base guesses and every start page's texts and numbers.
    """
    from lynn.envs.liveweb.evaluators import EvalContext, evaluate

    guesses = set(BASE_GUESSES) | set(GENERIC_ANSWERS)
    for t in tasks:
        guesses |= reader.start_page_guesses(t)
    out: dict[str, dict[str, int]] = {}
    for t in tasks:
        out.setdefault(t["split"], {})
        if "string_match" not in t["eval"]["eval_types"]:
            continue
        for a in guesses:
            if evaluate(t, EvalContext(answer=a))[0] > 0:
                out[t["split"]][a] = out[t["split"]].get(a, 0) + 1
    return out


def generate(
    data_dir: Path,
    reader: PageReader | None = None,
    salt: str = "",
    exclude: list[Task] | None = None,
    split: str | None = None,
    keys: set[str] | None = None,
) -> list[Task]:
    """Every task instance, in template order.

    ``salt`` draws other instances of the same templates (``""`` is the bundled bank): more train instances
    for an agent's demonstrations, or new instances no one has looked at for a held-out check. Instances
    equal to one of ``exclude``'s (same template, same instantiation and login) are not drawn again, so a
    salted draw never repeats a bundled test instance; ``split`` labels every drawn instance with that split
    instead of every 4th to the test split, and salted task ids end in ``@salt``. ``keys`` draws only those
    templates (and skips the whole-bank guess check, which is a property of a full draw).

    An instance that would pass unearned or is broken (:func:`passes_unearned`) is dropped and the
    template drawn again with another seed until it has as many as its first draw (``PER_TEMPLATE`` for
    most), or as many sound ones as the seed data holds. Without a ``reader`` the sites are served from
    ``data_dir``'s databases for the page checks. Raises ``RuntimeError`` if a guess still passes more
    than 1% of a split's instances.
    """
    if reader is None:
        from lynn.envs.liveweb.sites.server import SiteServer

        with SiteServer() as server:
            return generate(data_dir, PageReader(server.urls), salt, exclude, split, keys)
    dbs = {"shop": data_dir / "shop.db", "forum": data_dir / "forum.db", "admin": data_dir / "shop.db"}
    tasks: list[Task] = []
    for tid, (site, kind, key, intent, fn) in enumerate(TEMPLATES):
        if keys is not None and key not in keys:
            continue
        con = sqlite3.connect(f"file:{dbs[site]}?mode=ro", uri=True)
        con.row_factory = sqlite3.Row
        kept: list[tuple[dict, Task]] = []
        seen: set[str] = {
            json.dumps([t["instantiation_dict"], t.get("login") or None], sort_keys=True)
            for t in exclude or []
            if t.get("intent_template_id") == tid
        }
        hit: set[str] = set()  # start-page texts that pass a kept instance
        target = sum(1 for _ in fn(con, random.Random(f"{key}-{tid}")))  # a few templates have fewer than 8
        for attempt in range(100):
            if len(kept) >= target:
                break
            rng = random.Random(f"{key}-{tid}{salt}" + (f"-{attempt}" if attempt else ""))
            for inst, extra in fn(con, rng):
                ident = json.dumps([inst, extra.get("login")], sort_keys=True)
                probe = {"sites": [site], "start_url": f"__{site.upper()}__/", **extra}
                if ident in seen or passes_unearned(probe, dbs, reader):
                    continue
                hits = page_guesses_passing(probe, reader)
                if hits & hit:
                    continue
                hit |= hits
                seen.add(ident)
                kept.append((inst, extra))
                if len(kept) >= target:
                    break
        if len(kept) < max(1, target // 2) and not salt:  # the seed data has too few sound instances
            raise RuntimeError(f"template {key}: only {len(kept)} sound instances")
        for i, (inst, extra) in enumerate(kept):
            login = extra.pop("login", None)
            task = {
                "sites": [site],
                "task_id": f"{site}.{key}.{i}" + (f"@{salt}" if salt else ""),
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
                "split": split or ("test" if i % TEST_EVERY == TEST_EVERY - 1 else "train"),
                **extra,
            }
            tasks.append(task)
        con.close()
    if keys is not None:
        return tasks
    counts = guess_pass_counts(tasks, reader)
    for split, by_guess in counts.items():
        n = sum(1 for t in tasks if t["split"] == split)
        worst = max(by_guess.items(), key=lambda kv: kv[1], default=("", 0))
        if worst[1] > MAX_GUESS_RATE * n:
            raise RuntimeError(f"the guess {worst[0]!r} passes {worst[1]} of the {n} {split} instances")
    return tasks


def main(argv: list[str] | None = None) -> None:
    """``python -m lynn.envs.liveweb.tasks.generate`` rewrites the bundled bank; ``--salt S --split train
    --out FILE`` writes other instances of the templates (none equal to a bundled instance) to FILE, for
    ``gym.make("Lynn/LiveWeb-v0", tasks=FILE)``."""
    import argparse

    from lynn.envs.liveweb.sites.server import pristine_dir

    ap = argparse.ArgumentParser(prog="python -m lynn.envs.liveweb.tasks.generate", description=main.__doc__)
    ap.add_argument("--salt", default="", help="draw other instances of the templates")
    ap.add_argument("--split", choices=("train", "test"), help="label every drawn instance with this split")
    ap.add_argument("--out", help="output file (default: the bundled bank)")
    args = ap.parse_args(argv)
    if args.salt and not args.out:
        raise SystemExit("--salt writes other instances: pass --out FILE (the bundled bank is unsalted)")
    bundled = json.loads(OUT.read_text(encoding="utf-8")) if args.salt else None
    out = Path(args.out) if args.out else OUT
    tasks = generate(pristine_dir(), salt=args.salt, exclude=bundled, split=args.split)
    out.write_text(json.dumps(tasks, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    kinds: dict[str, int] = {}
    for t in tasks:
        kinds[f"{t['sites'][0]}/{t['kind']}"] = kinds.get(f"{t['sites'][0]}/{t['kind']}", 0) + 1
    print(f"{len(TEMPLATES)} templates, {len(tasks)} tasks -> {out}: {kinds}")


if __name__ == "__main__":
    main()
