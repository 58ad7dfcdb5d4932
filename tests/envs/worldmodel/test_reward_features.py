"""The reward model's trajectory-aware and answer-context features (fourth pass), on the session's real
LiveWeb episodes (``web_data``: recorded with ``lynn collect`` in Chromium) and on small pages in the
LiveWeb accessibility-tree format; and the fitted model's ordering of a completed modify episode above
the same episode stopped before its last change."""

from __future__ import annotations

from typing import Any

import pytest

from lynn.envs.worldmodel.data import episodes, read_transitions, template_of
from lynn.envs.worldmodel.reward_model import (
    BASE_FEATURES,
    RewardModel,
    answer_context_features,
    answer_of,
    features,
    page_links,
    trajectory_features,
)

NEW = (
    "goal_values_typed",
    "last_step_new_url",
    "status_line",
    "status_new",
    "goal_link_followed",
    "goal_link_pending",
    "answer_counts_items",
    "answer_in_content",
    "answer_column_goal_word",
)

TABLE = """[e1] generic [active]:
  [e2] banner:
    [e3] navigation "Main":
      [e4] link "Garden":
        /url: /category/garden
      [e5] link "Orders":
        /url: /orders
  [e6] main:
    [e7] heading "Customers" [level=1]
    [e8] table "Customers grid":
      [e9] rowgroup:
        [e10] row:
          [e11] columnheader "Name"
          [e12] columnheader "City"
          [e13] columnheader "Orders"
      [e14] rowgroup:
        [e15] row:
          [e16] cell:
            [e17] link "Yusuf Ito":
              /url: /customers/25
          [e18] cell "7"
          [e19] cell "6"
        [e20] row:
          [e21] cell:
            [e22] link "Ines Garcia":
              /url: /customers/3
          [e23] cell "Lyon"
          [e24] cell "2\""""


def _real(web_data: dict[str, Any], template: str) -> list[dict[str, Any]]:
    rows = read_transitions(web_data["train"], web_data["test"])
    eps = [e for e in episodes(rows) if template_of(e[0]["task_id"]) == template and e[-1]["reward"] >= 1]
    assert eps, template
    return eps[0]


def _steps(ep: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    return [(r["obs"], r["action"]) for r in ep]


def test_new_features_are_in_the_vector() -> None:
    assert set(NEW) <= set(BASE_FEATURES)
    f = features("Open my cart.", "nav", [], {"url": "http://x/", "title": "", "axtree": ""}, "done")
    assert all(f"nav*{n}" in f and f"info*{n}" in f for n in NEW)


def test_page_links_tell_chrome_from_content() -> None:
    links = page_links(TABLE)
    assert ("Garden", "/category/garden", True) in links
    assert ("Yusuf Ito", "/customers/25", False) in links


def test_answer_in_content_and_under_its_column() -> None:
    goal = "How many orders has the customer Yusuf Ito placed?"
    right = answer_context_features(goal, TABLE, "6")
    assert right == {"answer_in_content": 1.0, "answer_column_goal_word": 1.0}
    # "7" is a cell of the same row, under "City": in the content, not under a goal word's column.
    assert answer_context_features(goal, TABLE, "7") == {
        "answer_in_content": 1.0,
        "answer_column_goal_word": 0.0,
    }
    # A category named only in the site's navigation is on every page: not the page's content.
    assert answer_context_features(goal, TABLE, "Garden")["answer_in_content"] == 0.0
    assert answer_context_features(goal, TABLE, "3") == {
        "answer_in_content": 0.0,
        "answer_column_goal_word": 0.0,
    }


def test_count_answer_matches_a_group_of_items() -> None:
    page = {"url": "http://x/wishlist", "axtree": TABLE}
    # Two body rows (the header row not counted) and three header cells.
    assert trajectory_features("How many?", [], page, "2")["answer_counts_items"] == 1.0
    assert trajectory_features("How many?", [], page, "3")["answer_counts_items"] == 1.0
    assert trajectory_features("How many?", [], page, "5")["answer_counts_items"] == 0.0


@pytest.mark.slow
def test_modify_episode_completed_vs_stopped_before_its_save(web_data) -> None:
    ep = _real(web_data, "admin.set_price")
    goal, steps, final = ep[0]["goal"], _steps(ep), ep[-1]["next_obs"]
    done = trajectory_features(goal, steps, final, "done")
    # The expert typed the new price (the goal's "$80.67" as "80.67") and saved: a new flash message.
    assert done["goal_values_typed"] == 1.0
    assert done["status_line"] == 1.0 and done["status_new"] == 1.0
    save = max(i for i, r in enumerate(ep) if r["action"].startswith("click"))
    cut = trajectory_features(goal, steps[:save], ep[save]["obs"], "done")
    assert cut["status_line"] == 0.0 and cut["status_new"] == 0.0
    # Stopped before typing the price: only the product's code was typed.
    fill = max(i for i, r in enumerate(ep) if r["action"].startswith("fill"))
    assert trajectory_features(goal, steps[:fill], ep[fill]["obs"], "done")["goal_values_typed"] < 1.0
    # The env's history ends with the stop action on the final page: it changes nothing.
    assert trajectory_features(goal, [*steps, (final, "send_msg_to_user('done')")], final, "done") == done


@pytest.mark.slow
def test_nav_episode_followed_the_goal_named_link(web_data) -> None:
    ep = _real(web_data, "shop.open_product")
    goal, steps, final = ep[0]["goal"], _steps(ep), ep[-1]["next_obs"]
    done = trajectory_features(goal, steps, final, "done")
    assert done["goal_link_followed"] == 1.0 and done["goal_link_pending"] == 0.0
    assert done["last_step_new_url"] == 1.0
    # Stopped on the search results: the product's link is there, not followed.
    click = max(i for i, r in enumerate(ep) if r["action"].startswith("click"))
    cut = trajectory_features(goal, steps[:click], ep[click]["obs"], "done")
    assert cut["goal_link_followed"] == 0.0 and cut["goal_link_pending"] == 1.0


@pytest.mark.slow
def test_fitted_model_ranks_completed_above_stopped(memory_model, web_data) -> None:
    rm = RewardModel.load(memory_model)
    for template in ("admin.set_price", "shop.open_product"):
        ep = _real(web_data, template)
        tid, goal, steps = ep[0]["task_id"], ep[0]["goal"], _steps(ep)
        answer, _ = answer_of(ep[-1]["action"])
        full = rm.score(tid, goal, steps, ep[-1]["next_obs"], answer)
        last = max(i for i, r in enumerate(ep) if r["action"].startswith("click"))
        stopped = rm.score(
            tid, goal, [*steps[:last], (ep[last]["obs"], ep[-1]["action"])], ep[last]["obs"], answer
        )
        assert full >= rm.threshold > stopped, (template, full, stopped)


def test_a_model_with_features_no_longer_computed_warns(tmp_path) -> None:
    RewardModel(["bias", "info*steps"], [0.0, 1.0], [0.0, 0.0], [1.0, 1.0]).save(tmp_path / "reward.json")
    with pytest.warns(UserWarning, match="steps.*lynn train reward-model"):
        RewardModel.load(tmp_path)


def test_a_salted_instance_is_scored_as_its_template() -> None:
    # Salted draws (`generate --salt val1`) end their ids in "@salt": the reward model must still find the
    # template's kind and answer shapes, or a modify task would be judged as an info task.
    assert template_of("shop.product_price.3@val1") == "shop.product_price"
    assert template_of("admin.set_price.12@fresh-20261203") == "admin.set_price"
    assert template_of("shop.product_price.3") == "shop.product_price"
    # A model that only says "modify tasks succeed": the salted instance gets its template's kind.
    model = RewardModel(["modify*bias"], [5.0], [0.0], [1.0], {"admin.set_price": "modify"})
    final = {"url": "http://x/", "title": "", "axtree": ""}
    salted = model.score("admin.set_price.0@val1", "Set the price", [], final, None)
    assert salted == model.score("admin.set_price.0", "Set the price", [], final, None) > 0.99


def test_multi_part_answers_are_judged_by_their_values() -> None:
    from lynn.envs.worldmodel.reward_model import answer_items, answer_shape

    page = (
        '[e1] main:\n  [e2] paragraph: "Karma: 5"\n  [e3] paragraph: "Joined: 2023-04-03"\n'
        "  [e4] list:\n    [e5] listitem: Blue Kettle\n    [e6] listitem: Red Mug"
    )
    final = {"url": "http://x/user/a", "title": "a", "axtree": page}
    karma = "What is the karma of the forum user a, and when did they join?"
    right = features(karma, "info", [], final, "5; 2023-04-03")
    wrong = features(karma, "info", [], final, "9; 2023-04-03")  # the first part is nowhere on the page
    assert right["answer_in_page"] == right["answer_value_on_page"] == 1.0
    assert wrong["answer_in_page"] == wrong["answer_value_on_page"] == 0.0
    wish = "How many products are on my wishlist, and which are they?"
    listed = features(wish, "info", [], final, "2; Blue Kettle, Red Mug")  # "2" counts its own list
    assert listed["answer_in_page"] == listed["answer_counts_items"] == 1.0
    assert features(wish, "info", [], final, "2; Blue Kettle, Green Cup")["answer_in_page"] == 0.0
    # Lists of any length and names of any number of words have one shape.
    assert answer_shape("2; 118, 4") == answer_shape("5; 151, 84, 32, 23, 14") == "9; 9"
    assert answer_shape("Pedro Fischer") == answer_shape("Ana Lopez Garcia") == "a"
    assert answer_shape("$11.64") == "$9.9"
    assert answer_items("2; Blue Kettle, Red Mug") == (["Blue Kettle", "Red Mug"], 2)
    assert answer_items("$3,603.28") == (["$3,603.28"], None)


def test_the_field_a_goal_value_was_typed_into_is_a_feature() -> None:
    page = '[e1] main:\n  [e2] textbox "Price": "73.34"\n  [e3] textbox "Stock": "104"\n  [e4] button "Save product"'
    goal = "Set the price of the product to $35.90."
    final = {"url": "http://x/products/9/edit", "title": "Edit", "axtree": page}

    def typed_into(bid: str) -> dict[str, float]:
        return trajectory_features(goal, [({"axtree": page}, f"fill('{bid}', '35.90')")], final, "done")

    right, wrong = typed_into("e2"), typed_into("e3")  # Price is named by the goal, Stock is not
    assert right["goal_values_in_named_fields"] == 1.0 and right["goal_values_in_other_fields"] == 0.0
    assert wrong["goal_values_in_named_fields"] == 0.0 and wrong["goal_values_in_other_fields"] == 1.0
    nothing = trajectory_features(goal, [], final, "done")
    assert nothing["goal_values_in_named_fields"] == nothing["goal_values_in_other_fields"] == 0.0
