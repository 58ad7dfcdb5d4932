"""Each evaluator type passes the right final state and fails a wrong one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from lynn.envs.liveweb.evaluators import EvalContext, evaluate, fill_placeholders, normalize

SITES = {"shop": "http://127.0.0.1:9001", "forum": "http://127.0.0.1:9002"}


def _task(**eval_spec: object) -> dict:
    return {"task_id": "t", "intent": "x", "eval": eval_spec}


def test_string_match_exact() -> None:
    task = _task(eval_types=["string_match"], reference_answers={"exact_match": "$48.44"})
    assert evaluate(task, EvalContext(answer=" $48.44. "))[0] == 1.0
    assert evaluate(task, EvalContext(answer="$48.45"))[0] == 0.0
    assert evaluate(task, EvalContext(answer=None))[0] == 0.0


def test_string_match_must_include_and_alternatives() -> None:
    task = _task(eval_types=["string_match"], reference_answers={"must_include": ["Acme", "blue |OR| navy"]})
    assert evaluate(task, EvalContext(answer="The ACME kettle in navy"))[0] == 1.0
    assert evaluate(task, EvalContext(answer="The Acme kettle in red"))[0] == 0.0


def test_string_match_infeasible_needs_report_infeasible_or_na() -> None:
    task = _task(eval_types=["string_match"], reference_answers={"fuzzy_match": "N/A"})
    assert evaluate(task, EvalContext(answer=None, infeasible=True))[0] == 1.0
    assert evaluate(task, EvalContext(answer="N/A"))[0] == 1.0  # what BrowserGym tells agents to answer
    assert evaluate(task, EvalContext(answer="no"))[0] == 0.0
    assert evaluate(task, EvalContext(answer=None))[0] == 0.0


def test_fuzzy_match_asks_the_judge_never_a_substring() -> None:
    class Judge:
        def __init__(self) -> None:
            self.calls: list[tuple[str, str, str]] = []

        def fuzzy_match(self, pred: str, ref: str, question: str) -> float:
            self.calls.append((pred, ref, question))
            return float("forty" in pred)

        def unachievable_match(self, pred: str, reason: str, question: str) -> float:
            return 0.0

    task = _task(eval_types=["string_match"], reference_answers={"fuzzy_match": ["40"]})
    assert evaluate(task, EvalContext(answer="40"))[0] == 0.0  # no judge: 0, not a substring pass
    judge = Judge()
    assert evaluate(task, EvalContext(answer="about forty", judge=judge, intent="How many?"))[0] == 1.0
    assert evaluate(task, EvalContext(answer="40", judge=judge, intent="How many?"))[0] == 0.0
    assert judge.calls[0] == ("about forty", "40", "How many?")


def test_url_match_fails_an_extra_non_empty_parameter() -> None:
    task = _task(eval_types=["url_match"], reference_url="__SHOP__/category/books?sort=price_asc")
    extra = EvalContext(url="http://127.0.0.1:9001/category/books?sort=price_asc&max_price=5", sites=SITES)
    assert evaluate(task, extra)[0] == 0.0
    assert evaluate(_task(eval_types=["url_match"], reference_url=""), extra)[0] == 0.0


def test_page_list_compares_what_the_pages_list() -> None:
    pages = {
        ("http://127.0.0.1:9001/search?q=kettle", "main tr"): ["Blue kettle $10", "Red kettle $12"],
        ("http://127.0.0.1:9001/search?q=kettle", "main h1"): ["Results for kettle"],
        ("http://127.0.0.1:9001/search?q=kettle&max=11", "main tr"): ["Blue kettle $10"],
        ("http://127.0.0.1:9001/search?q=kettle&max=11", "main h1"): ["Results for kettle"],
        ("http://127.0.0.1:9001/search?q=kettle&x=", "main tr"): ["Blue  kettle $10 ", "Red kettle $12"],
        ("http://127.0.0.1:9001/search?q=kettle&x=", "main h1"): ["Results for kettle"],
        ("http://127.0.0.1:9001/search?q=none", "main tr"): [],
        ("http://127.0.0.1:9001/search?q=none", "main h1"): ["Results for none"],
    }
    spec = {"reference_url": "__SHOP__/search?q=kettle", "locator": "main tr", "also": "main h1"}
    task = _task(eval_types=["page_list"], page_list=spec)

    def ctx(url: str) -> EvalContext:
        return EvalContext(url=url, sites=SITES, page_items=lambda u, loc: pages[(u, loc)])

    assert evaluate(task, ctx("http://127.0.0.1:9001/search?q=kettle&x="))[0] == 1.0
    assert evaluate(task, ctx("http://127.0.0.1:9001/search?q=kettle&max=11"))[0] == 0.0
    assert evaluate(task, ctx("http://127.0.0.1:9002/search?q=kettle"))[0] == 0.0  # another site
    empty = _task(eval_types=["page_list"], page_list={**spec, "reference_url": "__SHOP__/search?q=none"})
    score, notes = evaluate(empty, ctx("http://127.0.0.1:9001/search?q=none"))
    assert score == 0.0 and "broken" in notes[0]  # an empty reference listing passes nothing


def test_url_match_ignores_param_order_and_empty_params() -> None:
    task = _task(eval_types=["url_match"], reference_url="__SHOP__/category/books?sort=price_asc")
    good = EvalContext(url="http://127.0.0.1:9001/category/books/?max_price=&sort=price_asc", sites=SITES)
    assert evaluate(task, good)[0] == 1.0
    wrong_sort = EvalContext(url="http://127.0.0.1:9001/category/books?sort=price_desc", sites=SITES)
    wrong_site = EvalContext(url="http://127.0.0.1:9002/category/books?sort=price_asc", sites=SITES)
    assert evaluate(task, wrong_sort)[0] == 0.0
    assert evaluate(task, wrong_site)[0] == 0.0


def test_url_match_alternatives() -> None:
    task = _task(eval_types=["url_match"], reference_url="__FORUM__/f/a |OR| __FORUM__/f/b")
    assert evaluate(task, EvalContext(url="http://127.0.0.1:9002/f/b", sites=SITES))[0] == 1.0
    assert evaluate(task, EvalContext(url="http://127.0.0.1:9002/f/c", sites=SITES))[0] == 0.0


def test_program_html_reads_the_page() -> None:
    pages = {
        ("http://127.0.0.1:9002/post/1", "h1"): "Weekend project report",
        ("http://127.0.0.1:9002/post/1", ""): "Weekend project report\nStatus: shipped",
    }
    task = _task(
        eval_types=["program_html"],
        program_html=[
            {"url": "last", "locator": "h1", "required_contents": {"exact_match": "Weekend project report"}},
            {
                "url": "__FORUM__/post/1",
                "locator": "",
                "required_contents": {"must_include": ["status: SHIPPED"]},
            },
        ],
    )
    ctx = EvalContext(
        url="http://127.0.0.1:9002/post/1", sites=SITES, page_text=lambda u, loc: pages[(u, loc)]
    )
    assert evaluate(task, ctx)[0] == 1.0
    pages[("http://127.0.0.1:9002/post/1", "h1")] = "Another title"
    assert evaluate(task, ctx)[0] == 0.0
    missing = EvalContext(
        url="http://127.0.0.1:9002/post/2", sites=SITES, page_text=lambda u, loc: pages[(u, loc)]
    )
    score, notes = evaluate(task, missing)
    assert score == 0.0 and "cannot read" in notes[0]


def test_db_check_queries_the_site_database(tmp_path: Path) -> None:
    db = tmp_path / "shop.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE cart (customer INTEGER, product INTEGER, qty INTEGER)")
    con.execute("INSERT INTO cart VALUES (1, 7, 3)")
    con.commit()
    con.close()
    check = {
        "site": "shop",
        "query": "SELECT qty FROM cart WHERE customer = ? AND product = ?",
        "params": [1, 7],
    }
    right = _task(eval_types=["db_check"], db_check=[{**check, "expected": 3}])
    wrong = _task(eval_types=["db_check"], db_check=[{**check, "expected": 2}])
    ctx = EvalContext(db={"shop": db})
    assert evaluate(right, ctx)[0] == 1.0
    assert evaluate(wrong, ctx)[0] == 0.0
    nothing = _task(eval_types=["db_check"], db_check=[{**check, "params": [2, 7], "expected": 3}])
    assert evaluate(nothing, ctx)[0] == 0.0
    # The evaluator opens the database read-only: a task file cannot change the sites' state.
    evil = _task(
        eval_types=["db_check"], db_check=[{"site": "shop", "query": "DELETE FROM cart", "expected": None}]
    )
    assert evaluate(evil, ctx)[0] == 0.0
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM cart").fetchone()[0] == 1


def test_scores_multiply_and_unknown_types_fail() -> None:
    task = _task(
        eval_types=["string_match", "url_match"],
        reference_answers={"exact_match": "ok"},
        reference_url="__SHOP__/",
    )
    assert evaluate(task, EvalContext(answer="ok", url="http://127.0.0.1:9001/", sites=SITES))[0] == 1.0
    assert evaluate(task, EvalContext(answer="ok", url="http://127.0.0.1:9001/cart", sites=SITES))[0] == 0.0
    score, notes = evaluate(_task(eval_types=["llm_judge"]), EvalContext(answer="x"))
    assert score == 0.0 and "unsupported" in notes[0]


def test_helpers() -> None:
    assert fill_placeholders("__SHOP__/x", {"shop": "http://h:1/"}) == "http://h:1/x"
    assert normalize('  "Hello   World." ') == "hello world"


def test_must_include_matches_whole_tokens_only() -> None:
    """Stricter than a substring: a one-character reference is a token of the answer (as in WebArena),
    and so is a number: "6" is not in "166" nor in "6.5"."""
    six = _task(eval_types=["string_match"], reference_answers={"must_include": ["6"]})
    assert evaluate(six, EvalContext(answer="166"))[0] == 0.0
    assert evaluate(six, EvalContext(answer="6.5"))[0] == 0.0
    assert evaluate(six, EvalContext(answer="6 reviews"))[0] == 1.0
    assert evaluate(six, EvalContext(answer="(6)"))[0] == 1.0
    task = _task(
        eval_types=["string_match"], reference_answers={"must_include": ["3", "Elena Silva", "$1,160.17"]}
    )
    assert evaluate(task, EvalContext(answer="3; Elena Silva, total $1,160.17."))[0] == 1.0
    assert evaluate(task, EvalContext(answer="13; Elena Silva, $1,160.17"))[0] == 0.0
    assert evaluate(task, EvalContext(answer="3; Elena Silvana, $1,160.17"))[0] == 0.0
    assert evaluate(task, EvalContext(answer="3; Elena Silva, $11,160.17"))[0] == 0.0
    neg = _task(eval_types=["string_match"], reference_answers={"must_include": ["-1", "2025-08-26"]})
    assert evaluate(neg, EvalContext(answer="Score -1, posted on 2025-08-26"))[0] == 1.0
    assert evaluate(neg, EvalContext(answer="Score 1, posted on 2025-08-26"))[0] == 0.0


def test_url_match_ignores_the_case_of_the_host_name() -> None:
    """Host names are case-insensitive (RFC 3986); paths are not."""
    task = _task(eval_types=["url_match"], reference_url="http://localhost:9001/category/books")
    assert evaluate(task, EvalContext(url="http://LOCALHOST:9001/category/books"))[0] == 1.0
    assert evaluate(task, EvalContext(url="HTTP://LocalHost:9001/category/books/"))[0] == 1.0
    assert evaluate(task, EvalContext(url="http://localhost:9001/Category/Books"))[0] == 0.0
