"""Exact behaviour of the action parser, pinned by hand from BrowserGym's action grammar.

BrowserGym's high-level action strings (``click(bid, button='left', modifiers=[])``,
``send_msg_to_user(text)``, ...) are parsed without running them; these tests fix the parser's entry
points, its free-text scan, its limits and its error messages (the agent reads them to correct itself),
with every expected value written out by hand. Pure parser tests: no browser, a fraction of a second.
"""

from __future__ import annotations

import sys

import pytest

from lynn.envs.liveweb import actions as A
from lynn.envs.liveweb.actions import Action, ActionError, action_help, parse_action, parse_actions


def _err(fn, *args, **kw) -> str:
    with pytest.raises(ActionError) as info:
        fn(*args, **kw)
    return str(info.value)


# -- parse_action / parse_actions ----------------------------------------------------------------


def test_unparsable_single_action_quotes_80_chars_and_the_syntax_error() -> None:
    text = "click(" + "a" * 100
    assert _err(parse_action, text) == f"cannot parse {text[:80]!r}: '(' was never closed"


@pytest.fixture
def recursion_limit():
    # Python's AST construction depth follows the process-wide recursion limit, which other libraries
    # in the same process may raise (a clean-clone CI run saw it raised); pin it, then restore it.
    old = sys.getrecursionlimit()
    yield sys.setrecursionlimit
    sys.setrecursionlimit(old)


def test_too_deep_expression_is_an_action_error_with_the_reason(recursion_limit) -> None:
    recursion_limit(1000)
    text = "-" * 4000 + "1"
    msg = _err(parse_action, text)
    assert msg.startswith(f"cannot parse {'-' * 80!r}: maximum recursion depth exceeded")


def test_deep_expression_under_a_raised_limit_is_still_refused_as_not_a_call(recursion_limit) -> None:
    recursion_limit(100_000)
    assert _err(parse_action, "-" * 4000 + "1") == f"expected one call such as click('e12'), got {'-' * 80!r}"


def test_no_action_found_quotes_the_first_80_chars() -> None:
    text = "hello " * 20
    src = text.strip()
    assert _err(parse_actions, text) == (
        f"no action found in {src[:80]!r}; write a call such as click('e12') or send_msg_to_user('42')"
    )


def test_one_call_is_fine_without_multiaction() -> None:
    assert parse_actions("click('e1')", multiaction=False) == [
        Action("click", {"bid": "e1", "button": "left", "modifiers": []})
    ]
    assert _err(parse_actions, "hover('e1')\nhover('e2')", multiaction=False) == (
        "2 actions given; this env takes one per step (multiaction=False)"
    )


def test_exactly_ten_calls_are_allowed_eleven_are_not() -> None:
    ten = "; ".join(f"hover('e{i}')" for i in range(10))
    assert [a.args["bid"] for a in parse_actions(ten)] == [f"e{i}" for i in range(10)]
    eleven = "; ".join(f"hover('e{i}')" for i in range(11))
    assert _err(parse_actions, eleven) == "11 actions in one step; at most 10"


def test_action_tag_wins_over_calls_in_the_prose() -> None:
    text = "I could click('e1') but <action>hover('e2')</action>"
    assert parse_actions(text) == [Action("hover", {"bid": "e2"})]


def test_last_fenced_block_wins_over_calls_in_the_prose() -> None:
    text = "Maybe click('e1').\n```python\nhover('e3')\n```\nthen\n```\nfocus('e4')\n```"
    assert parse_actions(text) == [Action("focus", {"bid": "e4"})]


def test_stop_action_must_be_last() -> None:
    assert _err(parse_actions, "send_msg_to_user('1'); click('e1')") == (
        "send_msg_to_user ends the episode: put it last"
    )


# -- _scan: calls inside free text ---------------------------------------------------------------


def test_call_at_the_very_end_of_prose() -> None:
    assert parse_actions("I will click('e12')") == [
        Action("click", {"bid": "e12", "button": "left", "modifiers": []})
    ]


def test_call_at_the_very_start_of_prose_is_kept() -> None:
    assert parse_actions("click('e1') then hover('e2') please") == [
        Action("click", {"bid": "e1", "button": "left", "modifiers": []}),
        Action("hover", {"bid": "e2"}),
    ]


def test_a_bracket_inside_a_string_does_not_end_the_call() -> None:
    assert parse_actions("Now fill('e3', 'a) b') and wait") == [
        Action("fill", {"bid": "e3", "value": "a) b", "enable_autocomplete_menu": False})
    ]


def test_eleven_calls_in_prose_are_counted_not_cut_at_ten() -> None:
    text = "Do " + " and ".join(f"hover('e{i}')" for i in range(11)) + " please"
    assert _err(parse_actions, text) == "11 actions in one step; at most 10"


def test_prose_naming_an_action_without_a_call_quotes_80_chars() -> None:
    text = "You should click (the blue button" + " next to it" * 10
    start = text.index("click")
    assert _err(parse_actions, text) == (
        f"cannot parse {text[start : start + 80]!r}: unbalanced brackets or arguments that are not literals"
    )


# -- _call: argument checks and their messages ---------------------------------------------------


def test_modifier_message_lists_the_allowed_modifiers() -> None:
    assert _err(parse_action, "click('e1', 'left', ['Hyper'])") == (
        "click: modifiers must be among Alt, Control, ControlOrMeta, Meta, Shift, got ['Hyper']"
    )


def test_unknown_action_lists_the_allowed_ones() -> None:
    msg = _err(parse_action, "jump('e1')")
    assert msg.startswith(
        "unknown action 'jump'; allowed: click, dblclick, hover, fill, clear, select_option,"
    )
    assert msg.endswith(", send_msg_to_user, report_infeasible, noop")


def test_too_many_arguments_lists_the_parameters() -> None:
    assert _err(parse_action, "click('e1', 'left', [], 4)") == (
        "click takes at most 3 arguments (bid, button, modifiers), got 4"
    )


def test_unknown_keyword_lists_the_parameters_or_none() -> None:
    assert _err(parse_action, "click('e1', foo=1)") == (
        "click has no parameter 'foo'; parameters: bid, button, modifiers"
    )
    assert _err(parse_action, "go_back(x=1)") == "go_back has no parameter 'x'; parameters: none"


def test_missing_argument_shows_the_signature() -> None:
    assert _err(parse_action, "click()") == "click needs 'bid': click(bid, button, modifiers)"


def test_not_a_call_quotes_80_chars() -> None:
    assert _err(parse_action, "x" * 100) == f"expected one call such as click('e12'), got {'x' * 80!r}"


def test_not_a_call_in_a_program_quotes_only_that_statement() -> None:
    assert _err(parse_actions, "click('e1')\nfoo") == "expected one call such as click('e12'), got 'foo'"


def test_type_messages_name_the_wanted_and_given_types() -> None:
    assert _err(parse_action, "scroll(True, 0)") == "scroll: delta_x must be int or float, got bool"
    assert _err(parse_action, "scroll('a', 0)") == "scroll: delta_x must be int or float, got str"
    assert _err(parse_action, "select_option('e1', [1])") == (
        "select_option: options must be a string or a list of strings"
    )


def test_choice_message_lists_the_choices() -> None:
    assert _err(parse_action, "click('e1', 'top')") == (
        "click: button must be one of left, middle, right, got 'top'"
    )


def test_literal_message_quotes_60_chars_of_the_argument() -> None:
    name = "y" * 70
    assert _err(parse_action, f"click({name})") == (
        f"arguments must be literals (strings or numbers), got {'y' * 60!r}"
    )


# -- _check_text ---------------------------------------------------------------------------------


def test_non_string_and_empty_messages() -> None:
    assert _err(parse_action, 12) == "an action is a string such as click('e12'), got int"
    assert _err(parse_actions, "   ") == "empty action; write one call such as click('e12') or noop()"


def test_length_limit_is_inclusive() -> None:
    head, tail = "send_msg_to_user('", "')"
    text = head + "a" * (4096 - len(head) - len(tail)) + tail
    assert len(text) == 4096
    assert parse_action(text).args["text"] == "a" * (4096 - len(head) - len(tail))
    assert _err(parse_action, text + " " + "b") == "action longer than 4096 characters"


# -- Action, _spec, action_help ------------------------------------------------------------------


def test_action_str_is_the_call_with_positional_reprs() -> None:
    assert str(Action("click", {"bid": "e1", "button": "left"})) == "click('e1', 'left')"
    assert str(Action("go_back", {})) == "go_back()"


def test_spec_defaults() -> None:
    s = A._spec((("bid", (str,)),))
    assert s == A.ActionSpec((("bid", (str,)),), {}, "", {}, {}, "bid")


def test_spec_passes_every_field() -> None:
    s = A._spec(
        (("x", (int, float)),),
        {"x": 1},
        "move",
        subset="coord",
        bounds={"x": (0.0, 2.0)},
        choices={"x": ("a",)},
    )
    assert s.params == (("x", (int, float)),)
    assert s.defaults == {"x": 1}
    assert s.doc == "move"
    assert s.subset == "coord"
    assert s.bounds == {"x": (0.0, 2.0)}
    assert s.choices == {"x": ("a",)}


def test_action_help_lines() -> None:
    lines = action_help().split("\n")
    assert len(lines) == len(A.SPECS)
    assert lines[0] == "click(bid, button='left', modifiers=[]): click an element"
    assert lines[2] == "hover(bid): move the mouse over an element"
    assert lines[-1] == "noop(wait_ms=None): do nothing, waiting wait_ms (default: the env's noop_wait_ms)"
    assert "go_back(): browser back" in lines


def test_element_ids_other_prefixes_are_refused_and_padding_is_stripped() -> None:
    """Only e<digits>, optionally after a frame prefix f<digits>, is an id; surrounding spaces are dropped."""
    msg = "click: 'xe12' is not an element id; use an id shown as [e12] in the axtree"
    assert _err(parse_action, "click('xe12')") == msg
    for bad in (
        "fxe12",
        "f1x12",
        "ge12",
        "e12x",
        "f e12",
        "ff1e12",
        "x1e12",
        "g2e7",
        "fe12",
        "F1e12",
        "1e12",
    ):
        with pytest.raises(ActionError):
            parse_action(f"click({bad!r})")
    assert parse_action("click(' e12 ')").args["bid"] == "e12"
    assert parse_action("click('f12e345')").args["bid"] == "f12e345"
    assert parse_action("click('\\tf2e7\\n')").args["bid"] == "f2e7"
    assert parse_action("drag_and_drop(' e1', 'e2 ')").args == {"from_bid": "e1", "to_bid": "e2"}
