"""The LiveWeb action memory (kNN-LM over delexicalised expert replies), on recorded real pages
(``fixtures/liveweb_steps.jsonl``) and small made-up ones."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest

from lynn.lm.web_candidates import RankedChooser, candidates, goal_dates, learn_format, reply_for, web_slots
from lynn.lm.web_memory import (
    ActionMemory,
    answer_addresses,
    answer_pattern,
    best_pattern,
    extend_answer,
    generalise,
    goal_word,
    mix,
    path_addresses,
    reply_forms,
    template_of,
)
from lynn.lm.web_ranker import parse_page

STEPS = [json.loads(line) for line in (Path(__file__).parent / "fixtures" / "liveweb_steps.jsonl").open()]


def _step(s: dict) -> dict:
    obs = {"goal": s["goal"], "axtree": s["axtree"], "url": s["url"], "title": s["title"]}
    return dict(s, obs=obs, reply=reply_for(s["action"], obs))


TRAIN = [_step(s) for s in STEPS if s["split"] == "train"]


def _page(*lines: str) -> list:
    return parse_page("\n".join(["[e0] main:", *(f"  [e{i + 1}] {x}" for i, x in enumerate(lines))]))


def test_instances_of_a_template_share_their_template_and_generalised_replies() -> None:
    a = "Set the product EL-1014 to $132.99 with 1 units in stock."
    b = "Set the product BO-1068 to $87.99 with 86 units in stock."
    assert template_of(a, web_slots(a)) == template_of(b, web_slots(b))
    constants = frozenset({"Save product", "Price", "done"})
    assert generalise('click link "Fjord Pro Webcam"', constants) == 'click link "*"'
    assert generalise('fill textbox "Price" = "N2"', constants) == 'fill textbox "Price" = "N2"'
    assert generalise('click button "Save product"', constants) == 'click button "Save product"'
    assert generalise('answer "done"', constants) == 'answer "done"'


def test_answer_addresses_name_where_an_answer_sits() -> None:
    page = _page(
        'heading "Halcyon Smart Notebook"',
        "paragraph: Price: $11.64",
        "paragraph: Rating: 4.3 (3 reviews)",
        'article "Review by Ana Lee"',
        'article "Review by Bo Wu"',
    )
    where = {
        span: places[0] for span, places in answer_addresses(page, "").items()
    }  # the first place of each
    assert where["$11.64"] == "Price/after"
    assert where["3"] == "Rating/m1"
    assert where["Ana Lee"] == "article#0.name/by" and where["Bo Wu"] == "article#1.name/by"


def test_a_multi_part_answer_is_rebuilt_on_another_instances_page() -> None:
    seen = path_addresses(
        _page(
            "paragraph: Rating: 4.3 (2 reviews)", 'article "Review by Ana Lee"', 'article "Review by Bo Wu"'
        )
    )
    pattern = answer_pattern("2; Ana Lee, Bo Wu", seen)
    assert pattern == "; main.0/article.*:name/by+, "
    other = path_addresses(
        _page(
            "paragraph: Rating: 3.0 (3 reviews)",
            'article "Review by Cy Ode"',
            'article "Review by Di Ray"',
            'article "Review by Ed Fox"',
        )
    )
    assert extend_answer("3", pattern, other) == "3; Cy Ode, Di Ray, Ed Fox"
    assert answer_pattern("2; Nobody", seen) is None  # a part that is no span of the page
    assert extend_answer("3", "; main.0/paragraph.5:value/after", other) is None  # the page lacks the part
    # One review teaches no list, but another instance's list of that kind makes it one.
    one = answer_pattern("2; Ana Lee", seen)
    assert one == "; main.0/article.0:name/by"
    assert best_pattern(Counter({one: 3, pattern: 1})) == pattern


def test_list_parts_are_located_by_their_path_not_by_the_first_span_of_their_role() -> None:
    """The parts of "2; Acme Pen, Bo Lamp" are the product cells of the body rows; a role-wide wildcard would
    take the SKU cell, or a banner link, first."""
    page = parse_page(
        "\n".join(
            [
                "[b0] banner:",
                '  [b1] link "Dashboard"',
                "[e0] main:",
                '  [e1] table "Items":',
                "    [e2] rowgroup:",
                "      [e3] row:",
                '        [e4] columnheader "SKU"',
                '        [e5] columnheader "Product"',
                "    [e6] rowgroup:",
                "      [e7] row:",
                '        [e8] cell "OF-1159"',
                '        [e9] cell "Acme Pen"',
                "      [e10] row:",
                '        [e11] cell "HO-1033"',
                '        [e12] cell "Bo Lamp"',
            ]
        )
    )
    paths = path_addresses(page)
    assert "Dashboard" not in paths  # the banner holds no answer
    pattern = answer_pattern("2; Acme Pen, Bo Lamp", paths)
    assert pattern == "; main.0/table.0/rowgroup.1/row.*/cell.1:name/all+, "
    assert extend_answer("2", pattern, paths) == "2; Acme Pen, Bo Lamp"
    # The count is no text of the page; the chooser offers it from the table's structure.
    assert "count:table#0>row*" in answer_addresses(page, "How many products are in order #80?")["2"]


def test_answers_are_addressed_by_rank_and_by_the_row_of_a_goal_value() -> None:
    page = parse_page(
        "\n".join(
            [
                "[e0] main:",
                '  [e1] table "Monthly sales":',
                "    [e2] row:",
                '      [e3] cell "2025-01"',
                '      [e4] cell "$7,873.88"',
                "    [e5] row:",
                '      [e6] cell "2025-02"',
                '      [e7] cell "$3,603.28"',
                "  [e8] list:",
                "    [e9] listitem: Cobalt Pro Blender (12 units)",
                "    [e10] listitem: Granite Pro Mouse (10 units)",
            ]
        )
    )
    by_month = answer_addresses(page, "What was the revenue in 2025-02?")
    by_month_other = answer_addresses(page, "What was the revenue in 2025-01?")
    key = next(a for a in by_month["$3,603.28"] if a.startswith("key:"))
    assert key in by_month_other["$7,873.88"]  # the same address, another month's row
    second = answer_addresses(page, "Which product is number 2 on the list?")
    first = answer_addresses(page, "Which product is number 1 on the list?")
    rank = next(a for a in second["Granite Pro Mouse"] if a.startswith("rank:"))
    assert rank in first["Cobalt Pro Blender"] and rank not in first.get("Granite Pro Mouse", [])


def test_dates_a_goal_implies_are_fill_candidates_and_stored_by_name() -> None:
    assert goal_dates("Show the orders placed in February 2024, newest first.") == {
        "@m0_first": "2024-02-01",
        "@m0_last": "2024-02-29",
    }
    assert goal_dates("What was the revenue in 2025-11?")["@m0_last"] == "2025-11-30"
    assert goal_dates("Order #2025-13 of SKU 12") == {}
    forms = reply_forms(
        'fill textbox "To date" = "2024-02-29"',
        'fill textbox "To date" = "2024-02-29"',
        frozenset({"To date"}),
        {},
        "Show the orders placed in February 2024, newest first.",
    )
    assert forms == ['fill textbox "To date" = "@m0_last"']


def test_mix_gives_a_forms_share_to_its_candidates_as_the_lm_weighs_them() -> None:
    import math

    forms = ['click link "*"', 'click link "*"', 'answer "done"']
    counts = Counter({'click link "*"': 3, 'answer "done"': 1})
    out = [math.exp(x) for x in mix([0.0, math.log(3), math.log(4)], forms, counts, 1.0)]
    assert out == pytest.approx([0.75 * 0.25, 0.75 * 0.75, 0.25])
    assert mix([0.0, 1.0], ["a", "b"], counts, 0.9) == pytest.approx(mix([0.0, 1.0], ["a", "b"], counts, 0.0))


def test_the_memory_holds_train_steps_only_and_round_trips(tmp_path: Path) -> None:
    mem = ActionMemory.build(TRAIN, min_episodes=1)
    assert {"Search products", "done"} <= mem.constants
    assert all(k.split("\t")[0] in ("h", "l", "p") for k in mem.table)
    st = TRAIN[0]
    assert mem.lookup(st["goal"], st["replies"], st["url"])  # a state it holds
    mem.save(tmp_path / "m.json.gz")
    back = ActionMemory.load(tmp_path / "m.json.gz")
    assert back.table == mem.table and back.constants == mem.constants and back.answers == mem.answers
    test_step = _step(next(s for s in STEPS if s["split"] == "test"))
    with pytest.raises(ValueError, match="train steps only"):
        ActionMemory.build([*TRAIN, test_step])


def test_the_memory_lifts_a_weak_lm_to_the_experts_choices(tiny_lm: Path) -> None:
    """A tiny LM trained on other data picks LiveWeb actions badly; mixed with the memory of the same train
    steps (weight 1) the chooser takes the expert's action on nearly all of them."""
    from lynn.lm.backends import TransformersGenerator

    gen = TransformersGenerator(str(tiny_lm), threads=1)
    fmt = dataclasses.replace(learn_format(TRAIN, k=20), slots=True, show_options=True)
    mem = ActionMemory.build(TRAIN, min_episodes=1)

    def right(weight: float) -> int:
        chooser = RankedChooser(
            gen.model, gen.tokenizer, dataclasses.replace(fmt, memory_weight=weight), memory=mem
        )
        return sum(chooser.choose(s["obs"], s["replies"])[0] == s["reply"] for s in TRAIN if s["reply"])

    n = sum(1 for s in TRAIN if s["reply"])
    alone, mixed = right(0.0), right(1.0)
    assert mixed >= 0.85 * n
    assert mixed > alone + 0.3 * n


def _orders_page(numbers: list[int], heading: str = "My orders") -> str:
    rows = [
        "[e0] banner:",
        '  [e1] link "Lynn Shop"',
        '  [e2] link "My account"',
        "[e3] main:",
        f'  [e4] heading "{heading}" [level=1]',
        '  [e5] table "Orders":',
        "    [e6] rowgroup:",
        "      [e7] row:",
        '        [e8] columnheader "Order"',
        '        [e9] columnheader "Total"',
        "    [e10] rowgroup:",
    ]
    for i, n in enumerate(numbers):
        rows += [
            f"      [r{i}] row:",
            f'        [l{i}] link "Order #{n}"',
            f'        [c{i}] cell "${n}.50"',
        ]
    return "\n".join(rows)


def test_a_count_no_text_shows_is_answered_with_the_list_it_counts(tiny_lm: Path) -> None:
    """ "How many orders … and what are their numbers?": the count is on no span of the page. The memory of
    three train instances stores it as the count of the table's rows and the numbers as a run of the rows'
    links, and the chooser answers a new instance with another count, weighing the count against the spans."""
    from lynn.lm.backends import TransformersGenerator

    goal = "How many orders have I placed in total, and what are their numbers?"
    train = []
    for i, nums in enumerate([[108, 92, 18], [68, 1], [146, 140, 119, 7]]):
        obs = {
            "goal": goal,
            "axtree": _orders_page(nums),
            "url": "http://x/account/orders",
            "title": "Orders",
        }
        reply = f'answer "{len(nums)}; ' + ", ".join(map(str, nums)) + '"'
        train.append(
            {"goal": goal, "obs": obs, "axtree": obs["axtree"], "replies": [], "reply": reply}
            | {"task_id": f"shop.my_order_count.{i}", "seed": 0, "split": "train", "step": 0}
        )
    mem = ActionMemory.build(train, min_episodes=1)
    gen = TransformersGenerator(str(tiny_lm), threads=1)
    fmt = dataclasses.replace(learn_format(TRAIN, k=20), slots=True, memory_weight=0.9)
    chooser = RankedChooser(gen.model, gen.tokenizer, fmt, memory=mem)
    new = {"goal": goal, "axtree": _orders_page([77, 50, 12, 9, 3]), "url": "http://x/account/orders"}
    assert chooser.choose(new, [])[0] == 'answer "5; 77, 50, 12, 9, 3"'
    # Without the memory the count is still a candidate (the LM may pick it), though no text shows "5".
    cands = [r for r, _ in candidates(new, parse_page(new["axtree"]), fmt)]
    assert 'answer "5"' in cands


def test_options_the_goal_names_unquoted_are_stored_by_where_the_goal_says_them() -> None:
    a, b = "Show the processing orders sorted by total.", "Show the delivered orders sorted by total."
    assert goal_word("processing", a) == goal_word("delivered", b) == "@w2"
    assert goal_word("pending", a) is None
    review = "Write a {}-star review titled “Not for me” for the Dunmore Ultra Novel."
    assert goal_word("4 stars", review.format(4)) == goal_word("2 stars", review.format(2)) is not None
    c = "Create a post in f/cycling titled “First time here” saying “Any advice is welcome.”."
    d = "Create a post in f/diy titled “Help” saying “Thanks.”."
    assert goal_word("cycling", c) == goal_word("diy", d) is not None
    shown = 'select combobox "Status" = "processing"'
    assert reply_forms(shown, shown, frozenset({"Status"}), {}, a) == ['select combobox "Status" = "@w2"']
    # A link named by nothing in the goal is also stored by its place (the first search result).
    click = 'click link "Dunmore Rugged Monitor Stand"'
    assert reply_forms(click, click, frozenset(), {}, a, path="main.0/list.0/listitem.0/link.0") == [
        'click link "*"',
        "click @main.0/list.0/listitem.0/link.0",
    ]


def test_the_memory_recalls_candidates_beyond_the_rankers_top_k(tiny_lm: Path) -> None:
    """With 3 units shown, several expert replies (the "top" sort link, a reading further down the page) are
    no candidate of the shown units; the memory's stored form brings the page's candidates of that form in, and
    the chooser takes them."""
    from lynn.lm.backends import TransformersGenerator
    from lynn.lm.web_candidates import top_units

    gen = TransformersGenerator(str(tiny_lm), threads=1)
    fmt = dataclasses.replace(learn_format(TRAIN, k=3), slots=True, memory_weight=1.0)
    chooser = RankedChooser(gen.model, gen.tokenizer, fmt, memory=ActionMemory.build(TRAIN, min_episodes=1))
    hidden = [
        s
        for s in TRAIN
        if s["reply"]
        and s["reply"]
        not in {r for r, _ in candidates(s["obs"], top_units(s["obs"], s["replies"], fmt), fmt)}
    ]
    assert len(hidden) >= 3
    assert sum(chooser.choose(s["obs"], s["replies"])[0] == s["reply"] for s in hidden) >= len(hidden) - 1


def test_the_memory_names_one_character_literals_and_orders_slots_by_whole_literals() -> None:
    """ "order #9" and "order #80" are one template: the memory stores ``goto /orders/N1`` for both (the LM's
    prompt keeps a lone 9 as written). A literal is placed where it stands whole: the 10 of "10 units" comes after
    the price, not at the "10" inside the SKU "HO-1046"."""
    from lynn.lm.web_memory import memory_slots

    assert memory_slots("How many different products are in order #9, and which are they?") == {"N1": "9"}
    assert web_slots("How many different products are in order #9, and which are they?") == {}
    goal = "Set the product HO-1046 to $90.99 with 10 units in stock."
    assert web_slots(goal) == {"L1": "HO-1046", "N1": "$90.99", "N2": "90.99", "N3": "10"}
    one = "Set the product EL-1014 to $132.99 with 1 units in stock."
    assert memory_slots(one) == {"L1": "EL-1014", "N1": "$132.99", "N2": "132.99", "N3": "1"}


def test_a_part_found_at_several_places_is_read_where_the_list_is() -> None:
    """ "1; wei37": wei37 wrote the post and its one comment. The comment list of another instance makes the
    part a run of comment authors, so a new one-comment page answers with its comment's author, not the post's."""
    lines = [
        "[e0] main:",
        '  [e1] article "Post":',
        "    [e2] paragraph:",
        '      [e3] link "wei37"',
    ]

    def page(authors: list[str]) -> dict:
        rows = list(lines)
        for i, a in enumerate(authors):
            rows.append(f'  [c{i}] article "Comment by {a}":')
        return path_addresses(parse_page("\n".join(rows)))

    one = answer_pattern("1; wei37", page(["wei37"]))
    two = answer_pattern("2; ana, bo", page(["ana", "bo"]))
    assert "|" in one  # both places kept
    best = best_pattern(Counter({one: 3, two: 1}))
    assert extend_answer("1", best, page(["cy"])) == "1; cy"
    assert extend_answer("3", best, page(["cy", "wei37", "di"])) == "3; cy, wei37, di"
