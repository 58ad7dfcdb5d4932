"""The LiveWeb candidate ranker and the valid-by-construction candidate actions, on recorded real pages.

``fixtures/liveweb_steps.jsonl``: expert steps recorded with ``lynn collect Lynn/LiveWeb-v0 --agent expert``
(28 train-split, 12 test-split steps: goal, axtree, earlier actions, the expert's action).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lynn.envs.liveweb.actions import parse_action
from lynn.lm.web_candidates import (
    WebFormat,
    answer_spans,
    candidates,
    goal_literals,
    learn_format,
    render_ranked,
    reply_for,
    top_units,
)
from lynn.lm.web_ranker import WebRanker, action_ref, parse_page, positives, recall_at_k

STEPS = [json.loads(line) for line in (Path(__file__).parent / "fixtures" / "liveweb_steps.jsonl").open()]
TRAIN = [s for s in STEPS if s["split"] == "train"]
TEST = [s for s in STEPS if s["split"] == "test"]


def _obs(s: dict) -> dict:
    return {"goal": s["goal"], "axtree": s["axtree"], "url": s["url"], "title": s["title"]}


def test_fixture_is_real_pages_of_both_splits() -> None:
    assert len(TRAIN) >= 20 and len(TEST) >= 10
    assert all(len(parse_page(s["axtree"])) > 10 for s in STEPS)


def test_parse_page_reads_units_and_their_context() -> None:
    page = parse_page(TRAIN[0]["axtree"])
    assert all(e.ref and e.role for e in page)
    assert [e.index for e in page] == list(range(len(page)))
    combos = [e for s in STEPS for e in parse_page(s["axtree"]) if e.role == "combobox"]
    assert combos and all(e.options for e in combos)  # options are the combobox's context, not units


def test_fitted_ranker_recall_on_held_out_pages() -> None:
    """Fitted on the train pages, the ranker keeps the expert's element in its top 20 on held-out pages,
    and beats the lexical prior it starts from."""
    fitted = WebRanker().fit(TRAIN)
    got = recall_at_k(fitted, TEST, ks=(20,))
    prior = recall_at_k(WebRanker(), TEST, ks=(20,))
    assert got["steps"] >= 10
    assert got["recall@20"] >= 0.9
    assert got["recall@20"] > prior["recall@20"]


def test_ranker_round_trips(tmp_path: Path) -> None:
    r = WebRanker().fit(TRAIN)
    r.save(tmp_path / "r.json")
    back = WebRanker.load(tmp_path / "r.json")
    s = TEST[0]
    page = parse_page(s["axtree"])
    assert back.scores(s["goal"], page, s["history"]) == r.scores(s["goal"], page, s["history"])


def check_candidates(axtree: str, cands: list[tuple[str, str]]) -> list[str]:
    """Problems of a candidate set: an action that does not parse, an element id not on the page, a
    duplicate reply. Empty when the set is valid."""
    refs = {e.ref for e in parse_page(axtree)}
    errors = []
    replies = [r for r, _ in cands]
    if len(set(replies)) != len(replies):
        errors.append("duplicate replies")
    for reply, action in cands:
        try:
            parse_action(action)
        except Exception as exc:  # noqa: BLE001 (any refusal is a finding)
            errors.append(f"{reply!r} -> {action!r} does not parse: {exc}")
            continue
        ref = action_ref(action)
        if ref is not None and action.split("(")[0] not in ("goto", "send_msg_to_user") and ref not in refs:
            errors.append(f"{reply!r} -> {action!r} names {ref}, not on the page")
    return errors


@pytest.fixture(scope="module")
def fmt() -> WebFormat:
    return learn_format(TRAIN, k=20)


def test_every_candidate_parses_and_names_an_element_on_the_page(fmt: WebFormat) -> None:
    for s in STEPS:
        obs = _obs(s)
        cands = candidates(obs, top_units(obs, s["replies"], fmt), fmt)
        assert len(cands) >= 3
        assert check_candidates(s["axtree"], cands) == []


def test_a_broken_candidate_set_fails_the_check(fmt: WebFormat) -> None:
    s = TEST[0]
    obs = _obs(s)
    cands = candidates(obs, top_units(obs, s["replies"], fmt), fmt)
    gone = [(r, "click('zz999')") for r, _ in cands[:1]]  # an element the page does not have
    unparsable = [("click it", "click(e12")]
    assert check_candidates(s["axtree"], gone)
    assert check_candidates(s["axtree"], unparsable)
    assert check_candidates(s["axtree"], cands[:2] + cands[:1])  # duplicate


def test_candidates_hold_the_experts_action_on_held_out_pages(fmt: WebFormat) -> None:
    """The expert's action is one of the candidates (reply form and the very action string), on most
    held-out steps; multi-part answers are built span by span at act time and are left out here."""
    hit = n = 0
    for s in TEST:
        obs = _obs(s)
        reply = reply_for(s["action"], obs)
        if reply is None or (reply.startswith("answer") and ";" in reply):
            continue
        n += 1
        cands = dict(candidates(obs, top_units(obs, s["replies"], fmt), fmt))
        if reply in cands:
            hit += 1
            exp = s["action"]
            got = cands[reply]
            assert parse_action(got).name == parse_action(exp).name
    assert n >= 8 and hit / n >= 0.85


def test_prompt_is_compact_and_keeps_the_goal(fmt: WebFormat) -> None:
    for s in STEPS:
        msgs = render_ranked(_obs(s), s["replies"], fmt)
        user = msgs[-1]["content"]
        assert user.startswith(f"Goal: {s['goal']}\n")
        assert "Elements:" in user and len(user) < 2500
        assert len(user.split("Elements:\n")[1].splitlines()) <= fmt.k
        assert not any(line.startswith("[") for line in user.splitlines())  # no element ids in the prompt


def test_goal_literals_and_answer_spans() -> None:
    lits = goal_literals("Change my address to 5 Rue Verte, Denver.")
    assert "5 Rue Verte" in lits and "Denver" in lits
    assert "Halcyon Smart Notebook" in goal_literals(
        "What is the price of the Halcyon Smart Notebook in the shop?"
    )
    assert "30" in goal_literals("cost at most $30, and which")
    assert "SP-1095" in goal_literals("Open the admin edit page of the product with SKU SP-1095.")
    page = parse_page('[e1] main:\n  [e2] paragraph: "Price: $11.64"\n  [e3] article "Review by Ana Lee"')
    spans = answer_spans(page)
    assert "$11.64" in spans and "Ana Lee" in spans


def test_positives_of_a_multi_part_answer() -> None:
    ax = '[e1] main:\n  [e2] paragraph: (2 reviews)\n  [e3] article "Review by Ana Lee"\n  [e4] article "Review by Bo Wu"'
    step = {"goal": "g", "axtree": ax, "action": "send_msg_to_user('2; Ana Lee, Bo Wu')"}
    assert positives(step, parse_page(ax)) == {"e3", "e4"}


def test_answer_plan_is_the_choosers_path_to_a_multi_part_answer() -> None:
    """The plan of ``2; Ana Lee, Bo Wu`` is the chooser's greedy path: the first part among the page's single
    candidates, one extension per step (each weighed against stopping early and the other extensions), and
    the full answer weighed against its own extensions; a part the page does not show has no plan."""
    from lynn.lm.web_candidates import answer_plan

    ax = '[e1] main:\n  [e2] paragraph: (2 reviews)\n  [e3] article "Review by Ana Lee"\n  [e4] article "Review by Bo Wu"'
    spans = answer_spans(parse_page(ax))
    plan = answer_plan('answer "2; Ana Lee, Bo Wu"', spans)
    assert plan is not None and plan.first == 'answer "2"'
    assert [t for t, _ in plan.steps] == ['answer "2; Ana Lee"', 'answer "2; Ana Lee, Bo Wu"']
    assert 'answer "2"' in plan.steps[0][1] and 'answer "2, Ana Lee"' in plan.steps[0][1]
    assert all(t not in others for t, others in plan.steps)
    assert (
        'answer "2; Ana Lee, Bo Wu, Bo Wu"' in plan.stops and 'answer "2; Ana Lee, Bo Wu"' not in plan.stops
    )
    one = answer_plan('answer "Ana Lee"', spans)
    assert one is not None and one.steps == [] and 'answer "Ana Lee; Bo Wu"' in one.stops
    assert answer_plan('answer "2; Ana Lee, Zed Ray"', spans) is None
    assert answer_plan('answer "done"', spans) is None and answer_plan('click link "x"', spans) is None


def test_whole_candidate_set_demos_hold_every_other_candidate(fmt: WebFormat) -> None:
    """``ranked_demos(negatives=-1)``: each demo's negatives are all the step's other candidates (plus, for an
    answer, its extensions); a multi-part answer adds choice-only demos for its first part and extensions."""
    from lynn.lm.web_candidates import ranked_demos

    steps = [dict(s, obs=_obs(s), reply=reply_for(s["action"], _obs(s))) for s in STEPS]
    demos = ranked_demos(steps, fmt, negatives=-1)
    main = [d for d in demos if not d.extra.get("choice_only")]
    assert len(main) == sum(1 for s in steps if s["reply"] is not None)
    for d, s in zip(main, [s for s in steps if s["reply"] is not None], strict=True):
        cands = [r for r, _ in candidates(s["obs"], top_units(s["obs"], s["replies"], fmt), fmt)]
        reply = d.messages[-1]["content"]
        assert reply not in d.extra["negatives"]
        if not (reply.startswith("answer") and (";" in reply or "," in reply)):
            assert set(cands) - {reply} <= set(d.extra["negatives"])
    ax = '[e1] main:\n  [e2] paragraph: (2 reviews)\n  [e3] article "Review by Ana Lee"\n  [e4] article "Review by Bo Wu"'
    obs = {"goal": "Who reviewed it?", "axtree": ax, "url": "http://shop/p/1", "title": "P"}
    st = {"obs": obs, "replies": [], "reply": 'answer "2; Ana Lee, Bo Wu"', "task_id": "t", "seed": 0}
    multi = ranked_demos([dict(st, split="train", step=0)], fmt, negatives=-1)
    assert [(d.messages[-1]["content"], bool(d.extra.get("choice_only"))) for d in multi] == [
        ('answer "2"', True),
        ('answer "2; Ana Lee"', True),
        ('answer "2; Ana Lee, Bo Wu"', True),
        ('answer "2; Ana Lee, Bo Wu"', False),
    ]
    assert (
        'answer "Ana Lee"' in multi[0].extra["negatives"]
    )  # the first part is picked among the page's spans
