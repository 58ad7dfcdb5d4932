"""The action parser accepts BrowserGym's action strings and nothing that could run code."""

from __future__ import annotations

import pytest

from lynn.envs.liveweb.actions import SPECS, Action, ActionError, action_help, parse_action, parse_actions


@pytest.mark.parametrize(
    ("text", "name", "args"),
    [
        ("click('e12')", "click", {"bid": "e12", "button": "left", "modifiers": []}),
        ('click("f2e7", button="right")', "click", {"bid": "f2e7", "button": "right", "modifiers": []}),
        ("click('e2', 'left', ['Shift'])", "click", {"bid": "e2", "button": "left", "modifiers": ["Shift"]}),
        ("click(12)", "click", {"bid": "e12", "button": "left", "modifiers": []}),
        ("click('12')", "click", {"bid": "e12", "button": "left", "modifiers": []}),
        (
            "  fill('e3', 'blue kettle')  ",
            "fill",
            {"bid": "e3", "value": "blue kettle", "enable_autocomplete_menu": False},
        ),
        (
            "fill('e3', value='漢字 🙂')",
            "fill",
            {"bid": "e3", "value": "漢字 🙂", "enable_autocomplete_menu": False},
        ),
        ("fill('e3', 'ab', True)", "fill", {"bid": "e3", "value": "ab", "enable_autocomplete_menu": True}),
        ("drag_and_drop('e1', 'e2')", "drag_and_drop", {"from_bid": "e1", "to_bid": "e2"}),
        ("upload_file('e4', 'a.txt')", "upload_file", {"bid": "e4", "file": "a.txt"}),
        ("keyboard_press('Control+a')", "keyboard_press", {"key": "Control+a"}),
        ("keyboard_type('hi')", "keyboard_type", {"text": "hi"}),
        ("mouse_click(10, 20.5)", "mouse_click", {"x": 10, "y": 20.5, "button": "left"}),
        ("scroll_at(5, 6, 0, 300)", "scroll_at", {"x": 5, "y": 6, "dx": 0, "dy": 300}),
        ("scroll(1e308, -1e308)", "scroll", {"delta_x": 100_000.0, "delta_y": -100_000.0}),
        ("noop(1e9)", "noop", {"wait_ms": 10_000.0}),
        ("select_option('e9', ['a', 'b'])", "select_option", {"bid": "e9", "options": ["a", "b"]}),
        ("press('e1', 'Control+Enter')", "press", {"bid": "e1", "key_comb": "Control+Enter"}),
        ("scroll(0, -200.5)", "scroll", {"delta_x": 0, "delta_y": -200.5}),
        ("goto('http://127.0.0.1:8000/x')", "goto", {"url": "http://127.0.0.1:8000/x"}),
        ("go_back()", "go_back", {}),
        ("tab_focus(1)", "tab_focus", {"index": 1}),
        ("send_msg_to_user('$12.00')", "send_msg_to_user", {"text": "$12.00"}),
        ("report_infeasible('no such product')", "report_infeasible", {"reason": "no such product"}),
        ("noop()", "noop", {"wait_ms": None}),
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
        ("scroll(float('inf'), 0)", "literals"),
        ("scroll(1e999, 0)", "finite"),
        ("click('e1', 'sideways')", "button must be one of"),
        ("click('e1', 'left', ['Hyper'])", "modifiers must be among"),
        ("fill('e1', 'a', 'yes')", "must be bool"),
        ("lambda: 1", "expected one call"),
        ("click()", "needs 'bid'"),
        ("click('e1', 'left', [], 'extra')", "at most"),
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


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("click('e1'); noop()", ["click", "noop"]),
        ("fill('e3', 'tea')\nclick('e4')", ["fill", "click"]),
        ("I will search first.\n```python\nfill('e3', 'tea')\nclick('e4')\n```", ["fill", "click"]),
        (
            "Thought: the answer is on the page.\n<action>send_msg_to_user('42')</action>",
            ["send_msg_to_user"],
        ),
        ("Let me click (the blue button): click('e7') # go", ["click"]),
        ("# comment only line\nnoop()", ["noop"]),
    ],
)
def test_parses_browsergym_multiaction_and_text_around(text: str, names: list[str]) -> None:
    assert [a.name for a in parse_actions(text)] == names


def test_multiaction_limits() -> None:
    with pytest.raises(ActionError, match="multiaction=False"):
        parse_actions("click('e1'); noop()", multiaction=False)
    with pytest.raises(ActionError, match="put it last"):
        parse_actions("send_msg_to_user('x'); click('e1')")
    with pytest.raises(ActionError, match="at most"):
        parse_actions("; ".join(["noop()"] * 11))
    with pytest.raises(ActionError, match="no action found"):
        parse_actions("I am not sure what to do.")
    with pytest.raises(ActionError, match="literals"):
        parse_actions("click(open('/etc/passwd').read())\nnoop()")
    with pytest.raises(ActionError, match="no action found"):
        parse_actions("import os; os.system('x')")
    with pytest.raises(ActionError, match="expected one call"):
        parse_actions("os.system('x'); click('e1')")
    with pytest.raises(ActionError, match="unknown action"):
        parse_actions("click('e1'); exec('1')")


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
