"""No constant answer passes more than 1% of the instances of a split, and the generator refuses the
instances a guess would pass or whose wanted page lists nothing.

The guessers try, on every instance of every split, each of the integers 0-20, yes/no, "done", "N/A",
the order statuses and every text and number the instances' start pages show (read over HTTP from the
sites, logged in as each task's user).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from lynn.envs.liveweb.sites.seed import TOPIC_WORDS
from lynn.envs.liveweb.sites.server import SiteServer, pristine_dir
from lynn.envs.liveweb.tasks import load_tasks
from lynn.envs.liveweb.tasks.generate import (
    MAX_GUESS_RATE,
    guess_pass_counts,
    page_guesses_passing,
    passes_unearned,
)
from lynn.envs.liveweb.tasks.guesses import BASE_GUESSES, PageReader

ALL_TASKS = load_tasks()


@pytest.fixture(scope="module")
def reader() -> Iterator[PageReader]:
    with SiteServer() as server:
        yield PageReader(server.urls)


def _dbs() -> dict:
    data = pristine_dir()
    return {"shop": data / "shop.db", "forum": data / "forum.db", "admin": data / "shop.db"}


def test_the_guessers_try_what_the_issue_lists(reader: PageReader) -> None:
    assert {str(i) for i in range(21)} | {"yes", "no", "done", "N/A"} <= set(BASE_GUESSES)
    home = reader.start_page_guesses(next(t for t in ALL_TASKS if t["sites"] == ["shop"]))
    assert {"Garden", "Popular products"} <= home  # the shop's own texts
    assert any(g.startswith("$") for g in home) and any(g.replace(".", "").isdigit() for g in home)


def test_no_constant_passes_more_than_one_percent_of_a_split(reader: PageReader) -> None:
    counts = guess_pass_counts(ALL_TASKS, reader)
    assert set(counts) == {"train", "test"}
    too_many = {}
    for split, by_guess in counts.items():
        n = sum(1 for t in ALL_TASKS if t["split"] == split)
        too_many.update({(split, g): c for g, c in by_guess.items() if c > MAX_GUESS_RATE * n})
    assert not too_many, too_many


def test_the_count_catches_a_small_integer_answer(reader: PageReader) -> None:
    """The issue's repro (shop.my_order_count.3 answered by '3'), in the form the tasks had before."""
    old = [
        {**t, "eval": {"eval_types": ["string_match"], "reference_answers": {"exact_match": "3"}}}
        for t in ALL_TASKS[:2]
    ]
    assert guess_pass_counts(old, reader)[old[0]["split"]]["3"] == 1 + (old[0]["split"] == old[1]["split"])
    assert passes_unearned(old[0], _dbs()) == "the guess '3' passes"


def test_a_start_page_text_passes_at_most_one_instance_of_a_template(reader: PageReader) -> None:
    by_template: dict[str, dict[str, int]] = {}
    for t in ALL_TASKS:
        for g in page_guesses_passing(t, reader):
            hits = by_template.setdefault(t["task_id"].rsplit(".", 1)[0], {})
            hits[g] = hits.get(g, 0) + 1
    assert all(c == 1 for hits in by_template.values() for c in hits.values()), by_template


def test_the_counts_come_with_items_a_guess_cannot_name() -> None:
    task = next(t for t in ALL_TASKS if t["task_id"].startswith("shop.my_order_count."))
    want = task["eval"]["reference_answers"]["must_include"]
    assert len(want) >= 2 and all(w.isdigit() for w in want)  # the count and the order numbers


def test_generator_refuses_a_search_whose_page_lists_nothing(reader: PageReader) -> None:
    """Two of the topic words match no post title: their search page lists nothing."""
    con = sqlite3.connect(f"file:{_dbs()['forum']}?mode=ro", uri=True)
    words = sorted({w for ws in TOPIC_WORDS.values() for w in ws})
    empty = [
        w for w in words if not con.execute("SELECT 1 FROM posts WHERE title LIKE ?", (f"%{w}%",)).fetchone()
    ]
    full = next(w for w in words if w not in empty)
    con.close()
    assert empty  # the seed data has such words, so the check matters

    def probe(q: str) -> dict:
        url = f"__FORUM__/search?q={q}"
        spec = {"reference_url": url, "locator": "main tbody tr, main li", "min_items": 1}
        return {
            "sites": ["forum"],
            "start_url": "__FORUM__/",
            "eval": {"eval_types": ["page_list"], "page_list": spec},
        }

    assert passes_unearned(probe(empty[0]), _dbs(), reader) == "the wanted page lists 0 items"
    assert passes_unearned(probe(full), _dbs(), reader) is None
    bundled = [t["instantiation_dict"]["query"] for t in ALL_TASKS if ".search_forum." in t["task_id"]]
    assert bundled and not set(bundled) & set(empty)


def test_generator_refuses_a_url_that_does_not_answer(reader: PageReader) -> None:
    task = {"sites": ["shop"], "start_url": "__SHOP__/", "eval": {"eval_types": ["url_match"]}}
    task["eval"]["reference_url"] = "__SHOP__/product/999999"
    assert (
        passes_unearned(task, _dbs(), reader) == "the wanted page '__SHOP__/product/999999' answers HTTP 404"
    )
    task["eval"]["reference_url"] = "__SHOP__/product/1"
    assert passes_unearned(task, _dbs(), reader) is None


def test_a_salted_draw_gives_other_instances_and_never_a_bundled_one(reader: PageReader) -> None:
    """``generate(salt=...)`` draws other instances of the templates (more train data, or new instances for a
    held-out check): none equals a bundled instance of its template, each is labelled with the asked split and
    its id names the salt, and the unsalted draw is the bundled bank itself."""
    import json

    from lynn.envs.liveweb.tasks.generate import generate

    keys = {"product_price", "my_orders_page"}
    bundled = [t for t in load_tasks() if t["task_id"].split(".")[1] in keys]
    same = generate(pristine_dir(), reader, keys=keys)
    assert [(t["task_id"], t["intent"], t["split"]) for t in same] == [
        (t["task_id"], t["intent"], t["split"]) for t in bundled
    ]

    def ident(t: dict) -> str:
        return json.dumps(
            [t["intent_template_id"], t["instantiation_dict"], t.get("login") or None], sort_keys=True
        )

    drawn = generate(pristine_dir(), reader, salt="aug-test", exclude=load_tasks(), split="train", keys=keys)
    assert drawn and all(t["split"] == "train" and t["task_id"].endswith("@aug-test") for t in drawn)
    assert not {ident(t) for t in drawn} & {ident(t) for t in bundled}
    assert len({ident(t) for t in drawn}) == len(drawn)
