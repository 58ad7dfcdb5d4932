"""LiveWeb evaluators: combinations in every order and every pass/fail pattern, and each rule's edges.

A task's score is the product of its evaluators' 0/1 scores, so it is 1 only when every one passes,
whatever the order; the notes come one per evaluator, in the task's order. Pages are served by small
in-test functions with the :class:`EvalContext` signatures (what the browser session provides); the
databases are real SQLite files.
"""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import pytest

from lynn.envs.liveweb.evaluators import (
    EVAL_TYPES,
    EVALUATORS,
    PAGE_LIST_LOCATOR,
    EvalContext,
    db_check,
    evaluate,
    fill_placeholders,
    normalize,
    page_list,
    program_html,
    string_match,
    url_match,
)

SHOP = "http://127.0.0.1:9001"
SITES = {"shop": SHOP + "/", "forum": "http://127.0.0.1:9002"}
PAGES = {
    (f"{SHOP}/orders", ""): "Your orders: 3 open",
    (f"{SHOP}/orders", "#total"): "  Total:  $12.50 ",
    (f"{SHOP}/list?q=tea", PAGE_LIST_LOCATOR): ["Green  tea", "Black tea"],
    (f"{SHOP}/list?q=tea", "h1"): ["Results for tea"],
    (f"{SHOP}/list?q=tea&page=1", PAGE_LIST_LOCATOR): ["Green tea", "Black tea"],
    (f"{SHOP}/list?q=tea&page=1", "h1"): ["Results for tea"],
    (f"{SHOP}/list?q=coffee", PAGE_LIST_LOCATOR): ["Mocha"],
    (f"{SHOP}/list?q=coffee", "h1"): ["Results for coffee"],
    (f"{SHOP}/list?q=none", PAGE_LIST_LOCATOR): [],
}


def page_text(url: str, locator: str, *prep: list) -> str:
    if (url, locator) not in PAGES:
        raise LookupError(f"no element {locator!r} on {url}")
    return str(PAGES[(url, locator)])


def page_items(url: str, locator: str) -> list[str]:
    if (url, locator) not in PAGES:
        raise LookupError(f"no element {locator!r} on {url}")
    return list(PAGES[(url, locator)])


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    path = tmp_path_factory.mktemp("db") / "shop.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        "CREATE TABLE orders (id INTEGER, status TEXT, total REAL);"
        "INSERT INTO orders VALUES (1, 'Shipped', 12.0), (2, 'open', 3.5);"
    )
    con.commit()
    con.close()
    return {"shop": path}


# One passing and one failing spec per evaluator, on the same final state.
SPECS = {
    "string_match": (
        {"reference_answers": {"exact_match": "42"}},
        {"reference_answers": {"exact_match": "41"}},
    ),
    "url_match": ({"reference_url": "__SHOP__/orders"}, {"reference_url": "__SHOP__/cart"}),
    "program_html": (
        {
            "program_html": [
                {"url": "last", "locator": "#total", "required_contents": {"must_include": ["$12.50"]}}
            ]
        },
        {
            "program_html": [
                {"url": "last", "locator": "#total", "required_contents": {"must_include": ["$13"]}}
            ]
        },
    ),
    "db_check": (
        {
            "db_check": [
                {"site": "shop", "query": "SELECT status FROM orders WHERE id = 1", "expected": "shipped"}
            ]
        },
        {
            "db_check": [
                {"site": "shop", "query": "SELECT status FROM orders WHERE id = 2", "expected": "shipped"}
            ]
        },
    ),
    "page_list": (
        {"page_list": {"reference_url": "__SHOP__/orders", "locator": "#total"}},
        {"page_list": {"reference_url": "__SHOP__/orders", "locator": "#total", "min_items": 50}},
    ),
}


def _ctx(db: dict[str, Path]) -> EvalContext:
    return EvalContext(
        answer="42",
        url=f"{SHOP}/orders",
        sites=SITES,
        page_text=page_text,
        page_items=lambda url, loc: [page_text(url, loc)],
        db=db,
    )


def _task(kinds: tuple[str, ...], passes: tuple[bool, ...]) -> dict:
    spec: dict = {"eval_types": list(kinds)}
    for kind, ok in zip(kinds, passes, strict=True):
        spec.update(SPECS[kind][0 if ok else 1])
    return {"task_id": "t", "eval": spec}


def test_each_spec_alone_passes_or_fails(db: dict[str, Path]) -> None:
    for kind in EVAL_TYPES:
        assert evaluate(_task((kind,), (True,)), _ctx(db))[0] == 1.0, kind
        assert evaluate(_task((kind,), (False,)), _ctx(db))[0] == 0.0, kind


@pytest.mark.parametrize("size", [2, 3])
def test_every_order_and_every_pass_fail_pattern(db: dict[str, Path], size: int) -> None:
    seen = 0
    for kinds in itertools.permutations(EVAL_TYPES, size):
        for passes in itertools.product((True, False), repeat=size):
            score, notes = evaluate(_task(kinds, passes), _ctx(db))
            assert score == (1.0 if all(passes) else 0.0), (kinds, passes, notes)
            assert [n.split(":")[0] for n in notes] == list(kinds)  # every evaluator ran, in order
            seen += 1
    assert seen == {2: 20 * 4, 3: 60 * 8}[size]


def test_all_five_in_every_order(db: dict[str, Path]) -> None:
    for kinds in itertools.permutations(EVAL_TYPES):
        for failing in range(-1, 5):
            passes = tuple(i != failing for i in range(5))
            assert evaluate(_task(kinds, passes), _ctx(db))[0] == (1.0 if failing < 0 else 0.0)


@pytest.mark.parametrize("position", [0, 1, 2])
def test_an_unsupported_type_anywhere_fails_the_task(db: dict[str, Path], position: int) -> None:
    kinds = ["string_match", "url_match"]
    kinds.insert(position, "llm_judge")
    task = _task(("string_match", "url_match"), (True, True))
    task["eval"]["eval_types"] = kinds
    score, notes = evaluate(task, _ctx(db))
    assert score == 0.0
    assert notes[-1] == "unsupported eval type 'llm_judge'; supported: " + ", ".join(EVAL_TYPES)
    assert len(notes) == 1  # the run stops there: no evaluator's note hides it


def test_notes_carry_each_evaluators_message(db: dict[str, Path]) -> None:
    score, notes = evaluate(_task(("url_match", "string_match"), (True, False)), _ctx(db))
    assert score == 0.0
    assert notes == ["url_match: url matches", "string_match: answer '42' != '41'"]
    assert evaluate({"task_id": "t"}, _ctx(db)) == (1.0, [])
    assert set(EVALUATORS) == set(EVAL_TYPES)


# --- string_match -------------------------------------------------------------------------------
class Judge:
    def __init__(self, verdicts: dict[str, float]) -> None:
        self.verdicts, self.calls = verdicts, []

    def fuzzy_match(self, pred: str, ref: str, question: str) -> float:
        self.calls.append((pred, ref, question))
        return self.verdicts.get(ref, 0.0)


def test_string_match_rules() -> None:
    def sm(answers: dict, **ctx: object) -> tuple[float, str]:
        return string_match({"reference_answers": answers}, EvalContext(**ctx))

    assert sm({"exact_match": "N/A"}, infeasible=True) == (1.0, "reported infeasible")
    assert sm({"exact_match": "N/A"}, answer=" n/a. ")[0] == 1.0
    assert sm({"exact_match": "N/A"}, answer="none")[0] == 0.0
    assert sm({"fuzzy_match": "N/A"}, answer=None) == (
        0.0,
        "the task is infeasible; expected report_infeasible (or the answer N/A)",
    )
    assert sm({"exact_match": "x"}, answer=None) == (0.0, "no answer was sent (send_msg_to_user)")
    assert sm({"exact_match": "x"}, answer="x", infeasible=True)[0] == 1.0
    assert sm({"exact_match": "Blue Kettle"}, answer='"blue   kettle."') == (1.0, "answer matches")
    assert sm({"exact_match": "Blue"}, answer="Blue Kettle")[0] == 0.0
    assert sm({"must_include": ["tea", "cup |OR| mug"]}, answer="Tea in a MUG")[0] == 1.0
    assert sm({"must_include": ["tea", "cup |OR| mug"]}, answer="tea in a glass") == (
        0.0,
        "answer 'tea in a glass' does not include 'cup |OR| mug'",
    )
    assert sm({"must_include": ["cup|OR|mug"]}, answer="mug")[0] == 0.0  # the separator has spaces
    assert sm({"must_include": ["dark blue"]}, answer="navy blue")[0] == 0.0  # a phrase, not its words
    assert sm({"exact_match": "a b", "must_include": ["b"]}, answer="a b")[0] == 1.0
    assert sm({"exact_match": "a b", "must_include": ["c"]}, answer="a b")[0] == 0.0
    assert sm({}, answer="anything")[0] == 1.0
    judge = Judge({"forty": 1.0, "40": 1.0})
    assert sm({"fuzzy_match": ["forty", "40"]}, answer="about 40", judge=judge, intent="q?")[0] == 1.0
    assert judge.calls == [("about 40", "forty", "q?"), ("about 40", "40", "q?")]
    judge = Judge({"forty": 1.0, "40": 0.5})
    assert sm({"fuzzy_match": ["forty", "40"]}, answer="x", judge=judge) == (
        0.0,
        "the judge found 'x' not equivalent to '40'",
    )
    assert sm({"fuzzy_match": ["40"]}, answer="40") == (
        0.0,
        "fuzzy_match needs the LLM judge; pass judge={'base_url': ..., 'model': ...}",
    )


# --- url_match ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("ref", "url", "want"),
    [
        ("__SHOP__/a?x=1&y=2", f"{SHOP}/a?y=2&x=1", 1.0),
        ("__SHOP__/a?x=1", f"{SHOP}/a/?x=1&empty=", 1.0),
        ("__SHOP__/a?x=1", f"{SHOP}/a?x=1&z=3", 0.0),
        ("__SHOP__/a?x=1&z=3", f"{SHOP}/a?x=1", 0.0),
        ("__SHOP__/a?t=1&t=2", f"{SHOP}/a?t=2&t=1", 1.0),
        ("__SHOP__/a?t=1&t=2", f"{SHOP}/a?t=1", 0.0),
        ("__SHOP__/a b", f"{SHOP}/a%20b", 1.0),
        ("__SHOP__/a", "HTTP://127.0.0.1:9001/a", 1.0),
        ("__SHOP__/a", "http://127.0.0.1:9002/a", 0.0),
        ("__SHOP__/a", f"{SHOP}/A", 0.0),
        ("__SHOP__", f"{SHOP}/", 1.0),
        ("__SHOP__/b |OR|  __SHOP__/a?x=1 ", f"{SHOP}/a?x=1", 1.0),
        ("__SHOP__/b |OR| __SHOP__/c", f"{SHOP}/a", 0.0),
        ("__SHOP__/a?x=1 |OR| __SHOP__/a?x=2", f"{SHOP}/a?x=2", 1.0),
        ("__SHOP__/a?x=1", f"{SHOP}/a?y=1", 0.0),  # parameter names count, not only values
        ("__SHOP__/aX", f"{SHOP}/a", 0.0),
    ],
)
def test_url_match_rules(ref: str, url: str, want: float) -> None:
    assert url_match({"reference_url": ref}, EvalContext(url=url, sites=SITES))[0] == want


def test_url_match_messages() -> None:
    assert url_match({}, EvalContext(url=SHOP)) == (0.0, "the task has no reference_url")
    assert url_match({"reference_url": " |OR| "}, EvalContext(url=SHOP))[1] == "the task has no reference_url"
    assert url_match({"reference_url": "__SHOP__/x"}, EvalContext(url=f"{SHOP}/y", sites=SITES)) == (
        0.0,
        f"url '{SHOP}/y' does not match '__SHOP__/x'",
    )


# --- page_list ----------------------------------------------------------------------------------
def _pl(spec: dict, url: str, items: object = page_items) -> tuple[float, str]:
    return page_list({"page_list": spec}, EvalContext(url=url, sites=SITES, page_items=items))


def test_page_list_rules() -> None:
    tea = {"reference_url": "__SHOP__/list?q=tea"}
    assert _pl(tea, f"{SHOP}/list?q=tea&page=1") == (1.0, "the page lists the 2 wanted items")
    assert _pl(tea, f"{SHOP}/list?q=coffee") == (0.0, "the page lists 1 items, not the 2 wanted")
    assert _pl(tea, f"{SHOP}/other?q=tea") == (
        0.0,
        f"the active page '{SHOP}/other?q=tea' is not the page '{SHOP}/list?q=tea' shows",
    )
    assert _pl({**tea, "also": "h1"}, f"{SHOP}/list?q=tea&page=1")[0] == 1.0
    assert _pl({**tea, "min_items": 2}, f"{SHOP}/list?q=tea&page=1")[0] == 1.0
    assert _pl({**tea, "min_items": 3}, f"{SHOP}/list?q=tea&page=1") == (
        0.0,
        "the reference page lists 2 items (< 3); the task is broken",
    )
    none = {"reference_url": "__SHOP__/list?q=none"}
    assert _pl(none, f"{SHOP}/list?q=none")[1] == "the reference page lists 0 items (< 1); the task is broken"
    assert _pl({**none, "min_items": 0}, f"{SHOP}/list?q=none")[0] == 1.0
    assert _pl({**tea, "locator": "ul li"}, f"{SHOP}/list?q=tea")[1].startswith("cannot read 'ul li': ")
    assert _pl({**tea, "also": "h2"}, f"{SHOP}/list?q=tea")[0] == 0.0
    assert _pl({}, SHOP) == (0.0, "the task has no page_list.reference_url")
    assert page_list({"page_list": tea}, EvalContext(url=SHOP)) == (0.0, "page_list needs a browser page")


def test_page_list_also_must_match() -> None:
    heading = {(f"{SHOP}/list?q=tea", "h1"): ["Results for tea"], (f"{SHOP}/list", "h1"): ["Page 2"]}

    def items(url: str, loc: str) -> list[str]:
        return heading.get((url, loc), ["row"]) if loc == "h1" else ["row"]

    spec = {"reference_url": "__SHOP__/list?q=tea", "also": "h1"}
    assert _pl(spec, f"{SHOP}/list", items) == (
        0.0,
        "the page's 'h1' differ from the wanted page's (another query or page)",
    )
    assert _pl({"reference_url": "__SHOP__/list?q=tea"}, f"{SHOP}/list", items)[0] == 1.0


# --- program_html -------------------------------------------------------------------------------
def test_program_html_rules() -> None:
    calls: list[tuple] = []

    def text(url: str, locator: str, *prep: list) -> str:
        calls.append((url, locator, *prep))
        return page_text(url, locator)

    def ph(targets: list, url: str = f"{SHOP}/orders") -> tuple[float, str]:
        return program_html({"program_html": targets}, EvalContext(url=url, sites=SITES, page_text=text))

    assert (
        ph([{"url": "last", "locator": "#total", "required_contents": {"exact_match": "total: $12.50"}}])[0]
        == 1.0
    )
    assert ph([{"locator": "#total", "required_contents": {"exact_match": "$12.50"}}]) == (
        0.0,
        "program_html: 'total: $12.50' != '$12.50'",
    )
    calls.clear()
    assert (
        ph([{"url": "__SHOP__/orders", "required_contents": {"must_include": ["3 OPEN"]}}], url=SHOP)[0]
        == 1.0
    )
    assert calls == [(f"{SHOP}/orders", "")]  # the placeholder filled, no prep argument
    calls.clear()
    ph([{"url": "last", "locator": "#total", "prep_actions": ["s()"], "required_contents": {}}])
    assert calls == [(f"{SHOP}/orders", "#total", ["s()"])]
    assert ph([{"required_contents": {"must_include": ["closed |OR| open"]}}])[0] == 1.0
    assert ph([{"required_contents": {"must_include": ["closed |OR| none"]}}]) == (
        0.0,
        "program_html: page does not include 'closed |OR| none'",
    )
    two = [
        {"required_contents": {"must_include": ["orders"]}},
        {"locator": "#total", "required_contents": {"must_include": ["$99"]}},
    ]
    assert ph(two)[0] == 0.0 and ph(two[:1])[0] == 1.0
    assert ph([{"required_contents": {"must_include": ["3 closed"]}}])[0] == 0.0  # a phrase, not its words
    long_text = "x" * 100

    def long_page(url: str, locator: str, *prep: list) -> str:
        return long_text

    assert program_html(
        {"program_html": [{"required_contents": {"exact_match": "y"}}]},
        EvalContext(url=SHOP, page_text=long_page),
    ) == (0.0, f"program_html: {'x' * 80!r} != 'y'")
    assert ph([{"locator": "#nope"}])[1].startswith(
        "program_html: cannot read '#nope' on http://127.0.0.1:9001/orders"
    )
    assert ph([]) == (1.0, "page content matches")
    assert program_html({"program_html": []}, EvalContext()) == (0.0, "program_html needs a browser page")


# --- db_check -----------------------------------------------------------------------------------
def test_db_check_rules(db: dict[str, Path]) -> None:
    def dc(*checks: dict) -> tuple[float, str]:
        return db_check({"db_check": list(checks)}, EvalContext(db=db))

    q = "SELECT status FROM orders WHERE id = ?"
    assert dc({"site": "shop", "query": q, "params": [1], "expected": " SHIPPED. "}) == (
        1.0,
        "database state matches",
    )
    assert dc({"site": "shop", "query": q, "params": [2], "expected": "shipped"}) == (
        0.0,
        f"db_check: {q} gave 'open', expected 'shipped'",
    )
    assert dc({"site": "shop", "query": q, "params": [9], "expected": None})[0] == 1.0
    assert dc({"site": "shop", "query": q, "params": [9], "expected": "open"})[0] == 0.0
    assert dc({"site": "shop", "query": q, "params": [2], "expected": None})[0] == 0.0
    total = "SELECT total FROM orders WHERE id = ?"
    assert dc({"site": "shop", "query": total, "params": [1], "expected": 12})[0] == 1.0  # 12.0 -> "12"
    assert dc({"site": "shop", "query": total, "params": [1], "expected": "12"})[0] == 1.0
    assert dc({"site": "shop", "query": total, "params": [2], "expected": "3.5"})[0] == 1.0
    assert dc({"site": "shop", "query": total, "params": [2], "expected": "3"})[0] == 0.0
    assert dc(
        {"site": "shop", "query": q, "params": [1], "expected": "shipped"},
        {"site": "shop", "query": q, "params": [2], "expected": "shipped", "description": "order 2 shipped"},
    ) == (0.0, "db_check: order 2 shipped gave 'open', expected 'shipped'")
    assert dc({"site": "forum", "query": q}) == (0.0, "db_check: no database for site 'forum'")
    assert dc({"query": q}) == (0.0, "db_check: no database for site None")
    assert dc({"site": "shop", "query": "SELECT nope FROM orders"})[1].startswith("db_check: query failed: ")
    assert dc({"site": "shop", "query": "DELETE FROM orders"})[0] == 0.0  # read-only: refused
    assert (
        dc({"site": "shop", "query": "SELECT count(*) FROM orders", "expected": 2})[0] == 1.0
    )  # not deleted


def test_helpers() -> None:
    assert (
        fill_placeholders("__SHOP__/a __FORUM__/b __NONE__", SITES)
        == f"{SHOP}/a http://127.0.0.1:9002/b __NONE__"
    )
    assert normalize("  'Quoted   Text.'  ") == "quoted text"
    assert normalize("`a`") == "a" and normalize("a.'") == "a"
    assert normalize(12.5) == "12.5"
    assert normalize("Line\n\tbreak ") == "line break"
