"""The action parser accepts BrowserGym's action strings and nothing that could run code."""

from __future__ import annotations

import pytest

from lynn.envs.liveweb.actions import SPECS, Action, ActionError, action_help, parse_action


@pytest.mark.parametrize(
    ("text", "name", "args"),
    [
        ("click('e12')", "click", {"bid": "e12", "button": "left"}),
        ('click("f2e7", button="right")', "click", {"bid": "f2e7", "button": "right"}),
        ("  fill('e3', 'blue kettle')  ", "fill", {"bid": "e3", "value": "blue kettle"}),
        ("fill('e3', value='漢字 🙂')", "fill", {"bid": "e3", "value": "漢字 🙂"}),
        ("select_option('e9', ['a', 'b'])", "select_option", {"bid": "e9", "options": ["a", "b"]}),
        ("press('e1', 'Control+Enter')", "press", {"bid": "e1", "key_comb": "Control+Enter"}),
        ("scroll(0, -200.5)", "scroll", {"delta_x": 0, "delta_y": -200.5}),
        ("goto('http://127.0.0.1:8000/x')", "goto", {"url": "http://127.0.0.1:8000/x"}),
        ("go_back()", "go_back", {}),
        ("tab_focus(1)", "tab_focus", {"index": 1}),
        ("send_msg_to_user('$12.00')", "send_msg_to_user", {"text": "$12.00"}),
        ("report_infeasible('no such product')", "report_infeasible", {"reason": "no such product"}),
        ("noop()", "noop", {"wait_ms": 0}),
    ],
)
def test_parses_browsergym_actions(text: str, name: str, args: dict) -> None:
    action = parse_action(text)
    assert action == Action(name, args)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("__import__('os').system('touch /tmp/pwned')", "expected one call"),
        ("eval('1+1')", "unknown action"),
        ("exec('import os')", "unknown action"),
        ("click(open('/etc/passwd').read())", "literals"),
        ("click(x)", "literals"),
        ("click('e1'); noop()", "cannot parse"),
        ("click('e1')\nnoop()", "cannot parse"),
        ("lambda: 1", "expected one call"),
        ("click()", "needs 'bid'"),
        ("click('e1', 'left', 'extra')", "at most"),
        ("fill('e1', 42)", "value must be str"),
        ("fill('e1', value='a', value='b')", "twice"),
        ("click('e1', nope=1)", "no parameter"),
        ("click('e1 >> css=body')", "not an element id"),
        ("click('xpath=//a')", "not an element id"),
        ("tab_focus(True)", "index must be int"),
        ("", "empty action"),
        ("click('e1'", "cannot parse"),
    ],
)
def test_rejects_anything_else_with_a_clear_message(text: str, message: str) -> None:
    with pytest.raises(ActionError, match=message):
        parse_action(text)


def test_non_string_and_huge_actions_are_errors_not_crashes() -> None:
    with pytest.raises(ActionError, match="string"):
        parse_action(123)  # type: ignore[arg-type]
    with pytest.raises(ActionError, match="longer"):
        parse_action("noop()" + " " * 5000 + "x")
    with pytest.raises(ActionError):
        parse_action("click(" * 200 + ")" * 200)


def test_help_lists_every_action() -> None:
    text = action_help()
    assert all(f"{name}(" in text for name in SPECS)
