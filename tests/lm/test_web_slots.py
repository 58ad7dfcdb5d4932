"""LiveWeb literal slots (``WebFormat.slots``): the goal's literals as short names in prompt and replies, on
recorded real pages (``fixtures/liveweb_steps.jsonl``)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from lynn.lm.web_candidates import (
    WebFormat,
    candidates,
    learn_format,
    mask_slots,
    ranked_demos,
    render_ranked,
    reply_for,
    shown_replies,
    top_units,
    web_slots,
)

STEPS = [json.loads(line) for line in (Path(__file__).parent / "fixtures" / "liveweb_steps.jsonl").open()]


def _obs(s: dict) -> dict:
    return {"goal": s["goal"], "axtree": s["axtree"], "url": s["url"], "title": s["title"]}


@pytest.fixture(scope="module")
def fmt() -> WebFormat:
    base = learn_format([s for s in STEPS if s["split"] == "train"], k=20)
    return dataclasses.replace(base, slots=True, show_options=True)


def test_slots_are_named_in_goal_order_and_skip_the_templates_verb() -> None:
    goal = "Write a 2-star review titled “Solid choice” for the Halcyon Compact Sunscreen."
    assert web_slots(goal) == {"L1": "2-star", "L2": "Solid choice", "L3": "Halcyon Compact Sunscreen"}
    assert "Write" not in web_slots(goal).values()
    # Two instances of one template get the same slot for the same role.
    a = web_slots("What is the price of the Halcyon Smart Notebook in the shop?")
    b = web_slots("What is the price of the Granite Ultra Dog Leash in the shop?")
    assert list(a) == list(b) == ["L1"]


def test_masking_replaces_whole_literals_only() -> None:
    slots = {"L1": "69", "L2": "Halcyon Smart Notebook"}
    assert mask_slots("Order #69 placed", slots) == "Order #L1 placed"
    assert (
        mask_slots("$69.00 and #169 and 2025-03-69 and 690", slots)
        == "$69.00 and #169 and 2025-03-69 and 690"
    )
    assert mask_slots('click link "Halcyon Smart Notebook"', slots) == 'click link "L2"'
    # The longer literal wins where two overlap.
    over = {"L1": "5 Rue Verte, Denver", "L2": "5 Rue Verte", "L3": "Denver"}
    assert mask_slots("to 5 Rue Verte, Denver.", over) == "to L1."
    assert mask_slots("City: Denver", over) == "City: L3"


def test_slot_prompt_names_the_literals_once_and_masks_them_everywhere(fmt: WebFormat) -> None:
    for s in STEPS:
        obs = _obs(s)
        user = render_ranked(obs, s["replies"], fmt)[-1]["content"]
        lines = user.splitlines()
        slots = web_slots(s["goal"])
        assert lines[0] == "Goal: " + mask_slots(s["goal"], slots)
        assert lines[1].startswith("Slots: ")
        for name, lit in slots.items():
            assert f"{name} " + '"' + lit.replace('"', "'") + '"' in lines[1]
            # Outside the Slots line no literal is left whole (its name stands there instead).
            rest = "\n".join(lines[:1] + lines[2:])
            assert mask_slots(rest, slots) == rest


def test_slot_replies_map_back_to_the_same_actions(fmt: WebFormat) -> None:
    """Masking is a renaming: distinct candidates stay distinct, and the expert's reply (masked) is among them."""
    hit = n = 0
    for s in STEPS:
        obs = _obs(s)
        cands = candidates(obs, top_units(obs, s["replies"], fmt), fmt)
        shown = shown_replies([r for r, _ in cands], s["goal"], fmt)
        assert len(set(shown)) == len(cands)
        reply = reply_for(s["action"], obs)
        if reply is None or ";" in reply:
            continue
        n += 1
        hit += shown_replies([reply], s["goal"], fmt)[0] in shown
    assert n >= 20 and hit / n >= 0.85


def test_slot_demos_are_masked_like_act_time_replies(fmt: WebFormat) -> None:
    steps = [dict(s, obs=_obs(s), reply=reply_for(s["action"], _obs(s))) for s in STEPS]
    demos = ranked_demos(steps, fmt, negatives=-1)
    for d in demos:
        goal = d.messages[1]["content"].splitlines()[0]
        table = d.messages[1]["content"].splitlines()[1]
        assert goal.startswith("Goal: ") and table.startswith("Slots: ")
    fills = [d for d in demos if d.messages[-1]["content"].startswith("fill ")]
    assert fills
    for d in fills:
        table = d.messages[1]["content"].splitlines()[1]
        slots = dict(re.findall(r'([LN]\d+) "([^"]*)"', table))
        reply = d.messages[-1]["content"]
        assert mask_slots(reply, slots) == reply  # no literal left to copy
    assert any(re.search(r'= "[LN]\d+"$', d.messages[-1]["content"]) for d in fills)


def test_combobox_options_are_shown_only_when_asked(fmt: WebFormat) -> None:
    ax = '[e1] main:\n  [e2] combobox "Sort by":\n    option "relevance"\n    option "price_asc"'
    obs = {"goal": "Sort it.", "axtree": ax, "url": "http://shop/s", "title": "S"}
    assert 'combobox "Sort by" [relevance|price_asc]' in render_ranked(obs, [], fmt)[-1]["content"]
    plain = dataclasses.replace(fmt, show_options=False, slots=False)
    assert "[relevance" not in render_ranked(obs, [], plain)[-1]["content"]
