"""Deterministic seed data for the bundled sites (shop + admin share ``shop.db``; forum has ``forum.db``).

Everything is generated in Python from a fixed seed, so every machine builds byte-identical content
and the task bank (generated from the same data) stays valid. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
from datetime import date, timedelta
from pathlib import Path

SEED = 2026
# Bump when the schema or the generator changes: cached pristine databases are keyed by it.
DATA_VERSION = "3"
DEFAULT_PASSWORD = "lynn-pass"
ADMIN_USER = "admin"
ADMIN_PASSWORD = "admin-pass"

CATEGORIES: dict[str, list[str]] = {
    "Electronics": ["Headphones", "Speaker", "Charger", "Webcam", "Keyboard", "Mouse"],
    "Home & Kitchen": ["Kettle", "Blender", "Toaster", "Cutting Board", "Knife Set", "Coffee Grinder"],
    "Books": ["Cookbook", "Novel", "Atlas", "Field Guide", "Poetry Collection", "Biography"],
    "Sports": ["Yoga Mat", "Dumbbell", "Water Bottle", "Jump Rope", "Tennis Racket", "Cycling Gloves"],
    "Toys": ["Puzzle", "Building Blocks", "Kite", "Board Game", "Plush Bear", "Train Set"],
    "Garden": ["Hose", "Trowel", "Planter", "Pruning Shears", "Watering Can", "Seed Kit"],
    "Office": ["Desk Lamp", "Notebook", "Stapler", "Monitor Stand", "Pen Set", "Desk Organizer"],
    "Beauty": ["Face Cream", "Shampoo", "Hair Dryer", "Nail Kit", "Lip Balm", "Sunscreen"],
    "Pets": ["Dog Leash", "Cat Tree", "Pet Bed", "Bird Feeder", "Chew Toy", "Litter Box"],
    "Outdoor": ["Tent", "Sleeping Bag", "Lantern", "Backpack", "Camp Stove", "Hiking Poles"],
}
ADJECTIVES = ["Classic", "Compact", "Deluxe", "Eco", "Pro", "Ultra", "Vintage", "Smart", "Mini", "Rugged"]
BRANDS = ["Acme", "Borealis", "Cobalt", "Dunmore", "Everly", "Fjord", "Granite", "Halcyon"]
FIRST = [
    "Alice",
    "Bruno",
    "Chloe",
    "Dmitri",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kavya",
    "Liam",
    "Maya",
    "Nikolai",
    "Olivia",
    "Pedro",
    "Quinn",
    "Rosa",
    "Samir",
    "Tara",
    "Umar",
    "Vera",
    "Wei",
    "Ximena",
    "Yusuf",
    "Zoe",
    "Aaron",
    "Bianca",
    "Carlos",
    "Dana",
]
LAST = [
    "Anders",
    "Becker",
    "Costa",
    "Dubois",
    "Evans",
    "Fischer",
    "Garcia",
    "Hansen",
    "Ito",
    "Jensen",
    "Kowalski",
    "Lopez",
    "Moreau",
    "Novak",
    "Okafor",
    "Petrov",
    "Quintero",
    "Rossi",
    "Silva",
    "Tanaka",
]
CITIES = ["Lisbon", "Oslo", "Austin", "Kyoto", "Nairobi", "Toronto", "Lyon", "Perth", "Quito", "Tallinn"]
STREETS = ["Maple St", "Harbor Rd", "Elm Ave", "Station Way", "Hill Lane", "River Rd", "Park Ave", "Mill St"]
ORDER_STATUSES = ["pending", "processing", "shipped", "delivered", "cancelled"]
REVIEW_TITLES = [
    "Great value",
    "Works as described",
    "Not bad",
    "Disappointed",
    "Love it",
    "Solid build",
    "Would buy again",
    "Too small",
    "Exceeded expectations",
    "Average",
]
REVIEW_BODIES = [
    "Arrived quickly and well packed.",
    "Does the job, nothing fancy.",
    "Quality could be better.",
    "My family uses it every day.",
    "Cheaper than elsewhere and just as good.",
    "Stopped working after a month.",
    "Exactly what I needed.",
    "The colour differs from the photo.",
]

SUBFORUMS = {
    "cooking": "Recipes, techniques and kitchen gear",
    "cycling": "Road, gravel and commuting",
    "gardening": "Vegetables, flowers and compost",
    "photography": "Cameras, lenses and editing",
    "programming": "Code, tools and careers",
    "travel": "Trips, tips and itineraries",
    "books": "What are you reading?",
    "diy": "Home repair and woodworking",
}
TOPIC_WORDS = {
    "cooking": [
        "sourdough starter",
        "cast iron pan",
        "knife sharpening",
        "risotto",
        "meal prep",
        "spice rack",
    ],
    "cycling": [
        "tubeless tyres",
        "winter commuting",
        "chain wax",
        "bike fitting",
        "gravel routes",
        "saddle sores",
    ],
    "gardening": [
        "tomato blight",
        "raised beds",
        "compost heap",
        "seed starting",
        "pruning roses",
        "slug control",
    ],
    "photography": [
        "prime lenses",
        "night sky",
        "film scanning",
        "street photos",
        "tripod choice",
        "RAW editing",
    ],
    "programming": [
        "code review",
        "type hints",
        "database indexes",
        "unit testing",
        "side projects",
        "vim macros",
    ],
    "travel": [
        "night trains",
        "packing light",
        "travel insurance",
        "Iceland ring road",
        "hostels",
        "jet lag",
    ],
    "books": [
        "science fiction",
        "book clubs",
        "audiobooks",
        "reading slumps",
        "translated fiction",
        "poetry",
    ],
    "diy": [
        "squeaky doors",
        "tile grout",
        "workbench plans",
        "wall anchors",
        "paint finishes",
        "shelf brackets",
    ],
}
TITLE_PATTERNS = [
    "Advice on {t}?",
    "My experience with {t}",
    "Beginner question about {t}",
    "{T}: what worked for me",
    "Is {t} worth it?",
    "Help with {t}",
    "Thoughts on {t}",
    "A guide to {t}",
]
COMMENT_TEXTS = [
    "Thanks, this helped a lot.",
    "I had the same problem last year.",
    "Have you tried asking a shop?",
    "Great write-up!",
    "I disagree, but interesting.",
    "Following this thread.",
    "Photos please!",
    "Same here, no luck so far.",
    "This is the way.",
    "Could you share more details?",
]


def password_hash(password: str) -> str:
    """Salted SHA-256 is enough for a local test site (no real secrets live here)."""
    return hashlib.sha256(("lynn:" + password).encode()).hexdigest()


SHOP_SCHEMA = """
CREATE TABLE categories (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, slug TEXT UNIQUE NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, sku TEXT UNIQUE NOT NULL, name TEXT UNIQUE NOT NULL,
  category_id INTEGER NOT NULL REFERENCES categories(id), price REAL NOT NULL, stock INTEGER NOT NULL,
  description TEXT NOT NULL, enabled INTEGER NOT NULL DEFAULT 1);
CREATE TABLE customers (id INTEGER PRIMARY KEY, username TEXT UNIQUE NOT NULL, name TEXT NOT NULL,
  email TEXT UNIQUE NOT NULL, password TEXT NOT NULL, street TEXT NOT NULL, city TEXT NOT NULL, joined TEXT NOT NULL);
CREATE TABLE reviews (id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL REFERENCES products(id),
  customer_id INTEGER NOT NULL REFERENCES customers(id), rating INTEGER NOT NULL, title TEXT NOT NULL,
  body TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
  created TEXT NOT NULL, status TEXT NOT NULL, total REAL NOT NULL, shipping TEXT NOT NULL, address TEXT NOT NULL);
CREATE TABLE order_items (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id),
  product_id INTEGER NOT NULL REFERENCES products(id), qty INTEGER NOT NULL, price REAL NOT NULL);
CREATE TABLE cart_items (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, product_id INTEGER NOT NULL,
  qty INTEGER NOT NULL, UNIQUE(customer_id, product_id));
CREATE TABLE wishlist (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, product_id INTEGER NOT NULL,
  UNIQUE(customer_id, product_id));
CREATE TABLE admins (id INTEGER PRIMARY KEY, username TEXT UNIQUE NOT NULL, password TEXT NOT NULL);
CREATE INDEX idx_products_cat ON products(category_id);
CREATE INDEX idx_orders_customer ON orders(customer_id);
CREATE INDEX idx_items_order ON order_items(order_id);
CREATE INDEX idx_reviews_product ON reviews(product_id);
"""

FORUM_SCHEMA = """
CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT UNIQUE NOT NULL, password TEXT NOT NULL,
  joined TEXT NOT NULL, bio TEXT NOT NULL);
CREATE TABLE subforums (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, description TEXT NOT NULL);
CREATE TABLE posts (id INTEGER PRIMARY KEY, subforum_id INTEGER NOT NULL REFERENCES subforums(id),
  user_id INTEGER NOT NULL REFERENCES users(id), title TEXT NOT NULL, body TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE comments (id INTEGER PRIMARY KEY, post_id INTEGER NOT NULL REFERENCES posts(id),
  user_id INTEGER NOT NULL REFERENCES users(id), body TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE votes (id INTEGER PRIMARY KEY, post_id INTEGER NOT NULL REFERENCES posts(id),
  user_id INTEGER NOT NULL REFERENCES users(id), value INTEGER NOT NULL, UNIQUE(post_id, user_id));
CREATE INDEX idx_posts_sub ON posts(subforum_id);
CREATE INDEX idx_comments_post ON comments(post_id);
CREATE INDEX idx_votes_post ON votes(post_id);
"""


def _slug(name: str) -> str:
    return (
        "".join(c if c.isalnum() else "-" for c in name.lower())
        .replace("--", "-")
        .replace("--", "-")
        .strip("-")
    )


def build_shop(path: Path, seed: int = SEED) -> None:
    """Write the shop database (products, customers, reviews, orders) to ``path``."""
    rng = random.Random(seed)
    con = sqlite3.connect(path)
    con.executescript(SHOP_SCHEMA)
    pid = 0
    for cid, (cat, nouns) in enumerate(CATEGORIES.items(), start=1):
        con.execute("INSERT INTO categories VALUES (?, ?, ?)", (cid, cat, _slug(cat)))
        combos = [(b, a, n) for n in nouns for a in ADJECTIVES for b in BRANDS]
        rng.shuffle(combos)
        for brand, adj, noun in combos[:24]:
            pid += 1
            base = {"Electronics": 60, "Outdoor": 80, "Books": 18, "Beauty": 15}.get(cat, 30)
            price = round(rng.uniform(0.3, 3.0) * base, 2)
            con.execute(
                "INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?, 1)",
                (
                    pid,
                    f"{cat[:2].upper()}-{1000 + pid}",
                    f"{brand} {adj} {noun}",
                    cid,
                    price,
                    rng.randint(0, 120),
                    f"The {adj.lower()} {noun.lower()} from {brand}. {rng.choice(REVIEW_BODIES)}",
                ),
            )
    n_products = pid
    usernames = set()
    customers = []
    start = date(2024, 1, 1)
    for i in range(40):
        first, last = FIRST[i % len(FIRST)], LAST[(i * 7) % len(LAST)]
        username = f"{first.lower()}.{last.lower()}"
        assert username not in usernames
        usernames.add(username)
        customers.append(
            (
                i + 1,
                username,
                f"{first} {last}",
                f"{username}@example.com",
                password_hash(DEFAULT_PASSWORD),
                f"{rng.randint(1, 250)} {rng.choice(STREETS)}",
                rng.choice(CITIES),
                (start + timedelta(days=rng.randint(0, 360))).isoformat(),
            )
        )
    con.executemany("INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?, ?)", customers)
    for rid in range(1, 701):
        con.execute(
            "INSERT INTO reviews VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                rid,
                rng.randint(1, n_products),
                rng.randint(1, 40),
                rng.choices([1, 2, 3, 4, 5], [1, 1, 2, 4, 5])[0],
                rng.choice(REVIEW_TITLES),
                rng.choice(REVIEW_BODIES),
                (date(2025, 1, 1) + timedelta(days=rng.randint(0, 300))).isoformat(),
            ),
        )
    prices = dict(con.execute("SELECT id, price FROM products"))
    oid = 0
    orders = []
    for cust in customers:
        for _ in range(rng.randint(2, 6)):
            orders.append((cust[0], date(2025, 1, 1) + timedelta(days=rng.randint(0, 330))))
    orders.sort(key=lambda o: (o[1], o[0]))  # order ids increase with time, like a real shop
    for cust_id, created in orders:
        oid += 1
        items = rng.sample(range(1, n_products + 1), rng.randint(1, 4))
        total = 0.0
        for p in items:
            qty = rng.randint(1, 3)
            con.execute(
                "INSERT INTO order_items (order_id, product_id, qty, price) VALUES (?, ?, ?, ?)",
                (oid, p, qty, prices[p]),
            )
            total += qty * prices[p]
        status = rng.choices(ORDER_STATUSES, [1, 2, 3, 6, 1])[0]
        cust = customers[cust_id - 1]
        con.execute(
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?)",
            (oid, cust_id, created.isoformat(), status, round(total, 2), "standard", f"{cust[5]}, {cust[6]}"),
        )
    for cust in customers[:20]:
        for p in rng.sample(range(1, n_products + 1), rng.randint(0, 3)):
            con.execute("INSERT INTO wishlist (customer_id, product_id) VALUES (?, ?)", (cust[0], p))
    con.execute("INSERT INTO admins VALUES (1, ?, ?)", (ADMIN_USER, password_hash(ADMIN_PASSWORD)))
    con.commit()
    con.close()


def build_forum(path: Path, seed: int = SEED) -> None:
    """Write the forum database (subforums, users, posts, comments, votes) to ``path``."""
    rng = random.Random(seed + 1)
    con = sqlite3.connect(path)
    con.executescript(FORUM_SCHEMA)
    users = []
    for i in range(30):
        name = f"{FIRST[i].lower()}{rng.randint(10, 99)}"
        users.append(
            (
                i + 1,
                name,
                password_hash(DEFAULT_PASSWORD),
                (date(2023, 1, 1) + timedelta(days=rng.randint(0, 700))).isoformat(),
                f"Hi, I'm {FIRST[i]} from {rng.choice(CITIES)}.",
            )
        )
    con.executemany("INSERT INTO users VALUES (?, ?, ?, ?, ?)", users)
    for sid, (name, desc) in enumerate(SUBFORUMS.items(), start=1):
        con.execute("INSERT INTO subforums VALUES (?, ?, ?)", (sid, name, desc))
    titles = set()
    post_rows = []
    sub_names = list(SUBFORUMS)
    while len(post_rows) < 140:
        sid = rng.randint(1, len(sub_names))
        topic = rng.choice(TOPIC_WORDS[sub_names[sid - 1]])
        title = rng.choice(TITLE_PATTERNS).format(t=topic, T=topic[0].upper() + topic[1:])
        if title in titles:
            continue
        titles.add(title)
        created = date(2025, 1, 1) + timedelta(days=rng.randint(0, 320), seconds=rng.randint(0, 86399))
        post_rows.append(
            (
                sid,
                rng.randint(1, 30),
                title,
                f"I've been thinking about {topic} lately. " + rng.choice(COMMENT_TEXTS),
                created,
            )
        )
    post_rows.sort(key=lambda r: r[4])
    for pid, (sid, uid, title, body, created) in enumerate(post_rows, start=1):
        con.execute(
            "INSERT INTO posts VALUES (?, ?, ?, ?, ?, ?)", (pid, sid, uid, title, body, created.isoformat())
        )
        for _ in range(rng.randint(0, 7)):
            con.execute(
                "INSERT INTO comments (post_id, user_id, body, created) VALUES (?, ?, ?, ?)",
                (
                    pid,
                    rng.randint(1, 30),
                    rng.choice(COMMENT_TEXTS),
                    (created + timedelta(days=rng.randint(0, 20))).isoformat(),
                ),
            )
        for voter in rng.sample(range(1, 31), rng.randint(0, 14)):
            con.execute(
                "INSERT INTO votes (post_id, user_id, value) VALUES (?, ?, ?)",
                (pid, voter, rng.choices([1, -1], [4, 1])[0]),
            )
    con.commit()
    con.close()


BUILDERS = {"shop.db": build_shop, "forum.db": build_forum}


def build_all(folder: Path) -> dict[str, Path]:
    """Build every database into ``folder`` (atomically: a half-written file is never left behind)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, builder in BUILDERS.items():
        target = folder / name
        if not target.exists():
            tmp = folder / f".{name}.{random.random():.8f}.tmp"
            builder(tmp)
            tmp.replace(target)
        out[name] = target
    return out
