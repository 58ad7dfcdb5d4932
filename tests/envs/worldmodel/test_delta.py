"""The Δ text format: round trips on real transitions, parse errors, fallback, anchored placement."""

from __future__ import annotations

import re

import pytest

from lynn.envs.worldmodel.data import read_transitions
from lynn.envs.worldmodel.delta import (
    Delta,
    DeltaError,
    Hunk,
    apply_delta,
    apply_delta_text,
    compute_delta,
    parse_delta,
    summarize,
)

HOME = {
    "url": "http://127.0.0.1:5000/",
    "title": "Home · Shop",
    "axtree": '[e1] generic:\n  [e2] link "Books":\n    /url: /category/books\n  [e3] textbox "Search"\n  [e4] button "Go"',
    "open_pages": "0* http://127.0.0.1:5000/",
    "last_action": "",
    "last_action_error": "",
    "goal": "find a book",
}
BOOKS = {
    "url": "http://127.0.0.1:5000/category/books",
    "title": "Books · Shop",
    "axtree": '[f1e1] generic:\n  [f1e2] link "Books":\n    /url: /category/books\n  [f1e3] heading "Books" [level=1]',
    "open_pages": "0* http://127.0.0.1:5000/category/books",
}


def test_navigation_delta_is_relative_and_frame_free_and_round_trips() -> None:
    d = compute_delta(HOME, "click('e2')", BOOKS)
    assert d.url == "/category/books" and d.frame == "f1"
    # Only the changed lines are edits: the shared header survives the id renumbering.
    assert d.n_edit_lines == 3
    assert d.summary == 'click link "Books" -> opened /category/books "Books · Shop"'
    text = d.to_text()
    assert text.startswith("[State change]\nURL: /category/books\nTitle: Books · Shop\nFrame: f1\n")
    new, problems = apply_delta(HOME, parse_delta(text), "click('e2')")
    assert problems == []
    assert {k: new[k] for k in ("url", "title", "axtree", "open_pages")} == BOOKS
    assert new["last_action"] == "click('e2')" and new["goal"] == HOME["goal"]


@pytest.mark.slow
def test_every_recorded_transition_round_trips(web_data) -> None:
    rows = read_transitions(web_data["train"], web_data["test"])
    assert len(rows) > 40
    for r in rows:
        d = compute_delta(r["obs"], r["action"], r["next_obs"])
        for removed in (False, True):
            new, problems = apply_delta(r["obs"], parse_delta(d.to_text(removed=removed)), r["action"])
            assert problems == []
            for k in ("url", "title", "axtree", "open_pages"):
                assert new[k] == r["next_obs"][k], (r["task_id"], r["step"], k)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("the page changes", "no '[State change]'"),
        ("[State change]\nURL: /\nColour: red\nSummary: s\n[Edits]\n[End]", "not one of the fields"),
        ("[State change]\nURL: /\nURL: /a\n[Edits]\n[End]", "a repeated field"),
        ("[State change]\nURL: /\nTitle: x\n@@ 0 -1\n[End]", "of the Δ header"),
        (
            "[State change]\nURL: /\nTitle: x\nFrame: -\nSummary: s\n[Edits]\n@@ two -1\n[End]",
            "malformed hunk",
        ),
        (
            "[State change]\nURL: /\nTitle: x\nFrame: -\nSummary: s\n[Edits]\nstray line\n[End]",
            "outside a hunk",
        ),
        ("[State change]\nURL: /\nTitle: x\nFrame: -\nSummary: s\n[Edits]\n@@ 0 -1\n+ok", "does not end"),
    ],
)
def test_invalid_delta_text_is_rejected_and_falls_back_to_copy(text: str, why: str) -> None:
    with pytest.raises(DeltaError, match=re.escape(why)) as exc:
        parse_delta(text)
    new, err, delta = apply_delta_text(HOME, text, "click('e4')")
    assert delta is None and "not a valid Δ" in err and str(exc.value) in err
    assert new["axtree"] == HOME["axtree"] and new["url"] == HOME["url"]
    assert new["last_action"] == "click('e4')"


def test_fields_left_out_keep_their_current_values() -> None:
    text = '[State change]\nSummary: typed\n[Edits]\n@@ 3 -1 =   [e3] textbox "Search"\n+  [e3] textbox "Search": tea\n[End]'
    new, err, delta = apply_delta_text(HOME, text, "fill('e3', 'tea')")
    assert err is None and delta.url is None and delta.to_text() == text
    assert (new["url"], new["title"]) == (HOME["url"], HOME["title"])
    assert new["axtree"] == HOME["axtree"].replace('textbox "Search"', 'textbox "Search": tea')


def test_anchor_places_a_hunk_written_with_a_wrong_index_and_bad_hunks_are_skipped() -> None:
    d = Delta(
        "/",
        "Home · Shop",
        "",
        "fill",
        [
            Hunk(
                0, 1, ['  [e3] textbox "Search": kettle'], anchor='  [e3] textbox "Search"'
            ),  # index 0 is wrong
            Hunk(9, 1, ["+never"], anchor="no such line"),  # anchor absent, index out of range
        ],
    )
    new, problems = apply_delta(HOME, d)
    assert new["axtree"].split("\n")[3] == '  [e3] textbox "Search": kettle'
    assert len(new["axtree"].split("\n")) == 5
    assert len(problems) == 1 and "hunk 2" in problems[0]


def test_reference_summary_of_an_in_page_change() -> None:
    after = dict(HOME, axtree=HOME["axtree"].replace('textbox "Search"', 'textbox "Search": kettle'))
    assert (
        summarize(HOME, "fill('e3', 'kettle')", after)
        == 'fill textbox "Search" -> page updated (+1 -1 lines)'
    )
    assert summarize(HOME, "noop()", HOME) == "noop -> no visible change"
