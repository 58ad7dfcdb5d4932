"""BrowserGym-style action strings, parsed safely.

``click("e12")``, ``fill("e7", "blue kettle")``, ``send_msg_to_user("42")``... An action string is parsed
with :mod:`ast` as exactly one call to a known action whose arguments are literals; nothing is ever
``exec``'d or ``eval``'d, so an action cannot run code, read files or reach the network. Element ids
are checked against a strict pattern before they become a Playwright ``aria-ref=`` selector, so an id
cannot smuggle in another selector engine (``e1 >> css=...``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

BID_RE = re.compile(r"^(?:f\d{1,6})?e\d{1,7}$")


class ActionError(ValueError):
    """An action string that cannot be parsed or is not allowed; the message says what to write."""


@dataclass(frozen=True)
class ActionSpec:
    """Signature of one action: positional parameter names, their types and defaults."""

    params: tuple[tuple[str, tuple[type, ...]], ...]
    defaults: dict[str, Any] = field(default_factory=dict)
    doc: str = ""


_STR = (str,)
_NUM = (int, float)
SPECS: dict[str, ActionSpec] = {
    "click": ActionSpec((("bid", _STR), ("button", _STR)), {"button": "left"}, "click an element"),
    "dblclick": ActionSpec((("bid", _STR),), {}, "double-click an element"),
    "hover": ActionSpec((("bid", _STR),), {}, "move the mouse over an element"),
    "fill": ActionSpec((("bid", _STR), ("value", _STR)), {}, "replace the text of an input"),
    "clear": ActionSpec((("bid", _STR),), {}, "empty an input"),
    "select_option": ActionSpec(
        (("bid", _STR), ("options", (str, list))), {}, "choose option(s) of a select"
    ),
    "press": ActionSpec((("bid", _STR), ("key_comb", _STR)), {}, "press keys on an element, e.g. 'Enter'"),
    "focus": ActionSpec((("bid", _STR),), {}, "focus an element"),
    "check": ActionSpec((("bid", _STR),), {}, "tick a checkbox"),
    "uncheck": ActionSpec((("bid", _STR),), {}, "untick a checkbox"),
    "scroll": ActionSpec((("delta_x", _NUM), ("delta_y", _NUM)), {}, "scroll the page by pixels"),
    "goto": ActionSpec((("url", _STR),), {}, "open a URL (only the task's sites)"),
    "go_back": ActionSpec((), {}, "browser back"),
    "go_forward": ActionSpec((), {}, "browser forward"),
    "new_tab": ActionSpec((), {}, "open a blank tab"),
    "tab_close": ActionSpec((), {}, "close the active tab"),
    "tab_focus": ActionSpec((("index", (int,)),), {}, "switch to tab number index"),
    "send_msg_to_user": ActionSpec((("text", _STR),), {}, "give the answer; ends the episode"),
    "report_infeasible": ActionSpec((("reason", _STR),), {}, "declare the task impossible; ends the episode"),
    "noop": ActionSpec((("wait_ms", _NUM),), {"wait_ms": 0}, "do nothing (optionally wait)"),
}
BID_ACTIONS = {n for n, s in SPECS.items() if s.params and s.params[0][0] == "bid"}
MAX_ACTION_CHARS = 4096


@dataclass(frozen=True)
class Action:
    """A parsed action: its name and arguments by parameter name."""

    name: str
    args: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.name}({', '.join(repr(v) for v in self.args.values())})"


def action_help() -> str:
    """One line per action, for prompts."""
    lines = []
    for name, spec in SPECS.items():
        params = ", ".join(
            p if p not in spec.defaults else f"{p}={spec.defaults[p]!r}" for p, _ in spec.params
        )
        lines.append(f"{name}({params}): {spec.doc}")
    return "\n".join(lines)


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ActionError(
            f"arguments must be literals (strings or numbers), got {ast.unparse(node)[:60]!r}"
        ) from exc


def parse_action(text: Any) -> Action:
    """Parse one action string into an :class:`Action`.

    Raises:
        ActionError: the string is not exactly one allowed call with literal arguments of the right types.
    """
    if not isinstance(text, str):
        raise ActionError(f"an action is a string such as click('e12'), got {type(text).__name__}")
    src = text.strip()
    if not src:
        raise ActionError("empty action; write one call such as click('e12') or noop()")
    if len(src) > MAX_ACTION_CHARS:
        raise ActionError(f"action longer than {MAX_ACTION_CHARS} characters")
    try:
        tree = ast.parse(src, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise ActionError(f"cannot parse {src[:80]!r}: {getattr(exc, 'msg', exc)}") from exc
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise ActionError(f"expected one call such as click('e12'), got {src[:80]!r}")
    name = call.func.id
    spec = SPECS.get(name)
    if spec is None:
        raise ActionError(f"unknown action {name!r}; allowed: {', '.join(SPECS)}")
    names = [p for p, _ in spec.params]
    if len(call.args) > len(names):
        raise ActionError(
            f"{name} takes at most {len(names)} arguments ({', '.join(names)}), got {len(call.args)}"
        )
    args: dict[str, Any] = {}
    for pname, node in zip(names, call.args, strict=False):
        args[pname] = _literal(node)
    for kw in call.keywords:
        if kw.arg is None or kw.arg not in names:
            raise ActionError(f"{name} has no parameter {kw.arg!r}; parameters: {', '.join(names) or 'none'}")
        if kw.arg in args:
            raise ActionError(f"{name} got {kw.arg!r} twice")
        args[kw.arg] = _literal(kw.value)
    for pname, types in spec.params:
        if pname not in args:
            if pname in spec.defaults:
                args[pname] = spec.defaults[pname]
                continue
            raise ActionError(f"{name} needs {pname!r}: {name}({', '.join(names)})")
        value = args[pname]
        if isinstance(value, bool) or not isinstance(value, types):
            want = " or ".join(t.__name__ for t in types)
            raise ActionError(f"{name}: {pname} must be {want}, got {type(value).__name__}")
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise ActionError(f"{name}: {pname} must be a string or a list of strings")
    if "bid" in args:
        args["bid"] = args["bid"].strip()
        if not BID_RE.match(args["bid"]):
            raise ActionError(
                f"{name}: {args['bid']!r} is not an element id; use an id shown as [e12] in the axtree"
            )
    ordered = {p: args[p] for p in names}
    return Action(name, ordered)
