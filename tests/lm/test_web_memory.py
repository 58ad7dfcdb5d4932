"""The LiveWeb action memory (kNN-LM over delexicalised expert replies), on recorded real pages
(``fixtures/liveweb_steps.jsonl``) and small made-up ones."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest

from lynn.lm.web_candidates import RankedChooser, learn_format, reply_for, web_slots
from lynn.lm.web_memory import (
    ActionMemory,
    answer_pattern,
    best_pattern,
    extend_answer,
    generalise,
    mix,
    span_addresses,
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


def test_span_addresses_name_where_an_answer_sits() -> None:
    page = _page(
        'heading "Halcyon Smart Notebook"',
        "paragraph: Price: $11.64",
        "paragraph: Rating: 4.3 (3 reviews)",
        'article "Review by Ana Lee"',
        'article "Review by Bo Wu"',
    )
    where = span_addresses(page)
    assert where["$11.64"] == "Price/after"
    assert where["3"] == "Rating/m1"
    assert where["Ana Lee"] == "article#0.name/by" and where["Bo Wu"] == "article#1.name/by"


def test_a_multi_part_answer_is_rebuilt_on_another_instances_page() -> None:
    seen = span_addresses(
        _page(
            "paragraph: Rating: 4.3 (2 reviews)", 'article "Review by Ana Lee"', 'article "Review by Bo Wu"'
        )
    )
    pattern = answer_pattern("2; Ana Lee, Bo Wu", seen)
    assert pattern == "; article#*.name/by+, "
    other = span_addresses(
        _page(
            "paragraph: Rating: 3.0 (3 reviews)",
            'article "Review by Cy Ode"',
            'article "Review by Di Ray"',
            'article "Review by Ed Fox"',
        )
    )
    assert extend_answer("3", pattern, other) == "3; Cy Ode, Di Ray, Ed Fox"
    assert answer_pattern("2; Nobody", seen) is None  # a part that is no span of the page
    assert extend_answer("3", "; Status/after", other) is None  # the page lacks the part
    # One review teaches no list, but another instance's list of that kind makes it one.
    one = answer_pattern("2; Ana Lee", seen)
    assert one == "; article#*.name/by"
    assert best_pattern(Counter({one: 3, pattern: 1})) == pattern


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
