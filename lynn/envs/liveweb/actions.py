"""BrowserGym's high-level actions, parsed safely.

``click("e12")``, ``fill("e7", "blue kettle")``, ``send_msg_to_user("42")``... BrowserGym's whole
high-level action set (subsets ``bid``, ``coord``, ``nav``, ``tab``, ``chat``, ``infeas`` and ``noop``)
is accepted, several calls per step (``multiaction``), with prose or a fenced block around them. Each
call is parsed with :mod:`ast` as a call to a known action whose arguments are literals; nothing is ever
``exec``'d or ``eval``'d, so an action cannot run code, read files or reach the network. Element ids
are checked against a strict pattern before they become a Playwright ``aria-ref=`` selector, so an id
cannot smuggle in another selector engine (``e1 >> css=...``); BrowserGym-style numeric ids (``12``)
mean ``e12``. Numbers must be finite and are clamped to sane ranges (a scroll of ``1e308`` pixels is a
scroll of ``MAX_SCROLL``).
"""

from __future__ import annotations

import ast
import copy
import math
import re
from dataclasses import dataclass, field
from typing import Any

BID_RE = re.compile(r"^(?:f\d{1,6})?e\d{1,7}$")


class ActionError(ValueError):
    """An action string that cannot be parsed or is not allowed; the message says what to write."""


@dataclass(frozen=True)
class ActionSpec:
    """Signature of one action: positional parameter names, their types, defaults, numeric bounds
    (values outside are clamped) and allowed values."""

    params: tuple[tuple[str, tuple[type, ...]], ...]
    defaults: dict[str, Any] = field(default_factory=dict)
    doc: str = ""
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    subset: str = "bid"


_STR = (str,)
_NUM = (int, float)
_BOOL = (bool,)
_LIST = (list,)
_FILES = (str, list)
BUTTONS = ("left", "middle", "right")
MODIFIERS = ("Alt", "Control", "ControlOrMeta", "Meta", "Shift")
MAX_SCROLL = 100_000.0  # pixels per scroll: past this Chromium's scroll offsets overflow (scroll(1e308, ...))
MAX_COORD = 100_000.0  # page coordinates; the browser clamps them further to the viewport
MAX_WAIT_MS = 10_000.0
_XY = {"x": (-MAX_COORD, MAX_COORD), "y": (-MAX_COORD, MAX_COORD)}
_BTN = {"button": BUTTONS}


def _spec(
    params: tuple, defaults: dict | None = None, doc: str = "", subset: str = "bid", **kw: Any
) -> ActionSpec:
    return ActionSpec(params, defaults or {}, doc, subset=subset, **kw)


# BrowserGym's high-level action set (browsergym.core.action.highlevel), by subset.
SPECS: dict[str, ActionSpec] = {
    # bid
    "click": _spec(
        (("bid", _STR), ("button", _STR), ("modifiers", _LIST)),
        {"button": "left", "modifiers": []},
        "click an element",
        choices=_BTN,
    ),
    "dblclick": _spec(
        (("bid", _STR), ("button", _STR), ("modifiers", _LIST)),
        {"button": "left", "modifiers": []},
        "double-click an element",
        choices=_BTN,
    ),
    "hover": _spec((("bid", _STR),), {}, "move the mouse over an element"),
    "fill": _spec(
        (("bid", _STR), ("value", _STR), ("enable_autocomplete_menu", _BOOL)),
        {"enable_autocomplete_menu": False},
        "replace the text of an input (True: type the last character, leaving an autocomplete menu open)",
    ),
    "clear": _spec((("bid", _STR),), {}, "empty an input"),
    "select_option": _spec((("bid", _STR), ("options", (str, list))), {}, "choose option(s) of a select"),
    "press": _spec((("bid", _STR), ("key_comb", _STR)), {}, "press keys on an element, e.g. 'Enter'"),
    "focus": _spec((("bid", _STR),), {}, "focus an element"),
    "check": _spec((("bid", _STR),), {}, "tick a checkbox"),
    "uncheck": _spec((("bid", _STR),), {}, "untick a checkbox"),
    "drag_and_drop": _spec((("from_bid", _STR), ("to_bid", _STR)), {}, "drag one element onto another"),
    "upload_file": _spec(
        (("bid", _STR), ("file", _FILES)),
        {},
        "set the file(s) of a file input (paths in the episode's upload dir)",
    ),
    # coord
    "scroll": _spec(
        (("delta_x", _NUM), ("delta_y", _NUM)),
        {},
        "scroll the page by pixels",
        subset="coord",
        bounds={"delta_x": (-MAX_SCROLL, MAX_SCROLL), "delta_y": (-MAX_SCROLL, MAX_SCROLL)},
    ),
    "scroll_at": _spec(
        (("x", _NUM), ("y", _NUM), ("dx", _NUM), ("dy", _NUM)),
        {},
        "scroll by (dx, dy) pixels with the mouse at (x, y)",
        subset="coord",
        bounds={**_XY, "dx": (-MAX_SCROLL, MAX_SCROLL), "dy": (-MAX_SCROLL, MAX_SCROLL)},
    ),
    "mouse_move": _spec(
        (("x", _NUM), ("y", _NUM)), {}, "move the mouse to (x, y)", subset="coord", bounds=_XY
    ),
    "mouse_down": _spec(
        (("x", _NUM), ("y", _NUM), ("button", _STR)),
        {"button": "left"},
        "press a mouse button at (x, y)",
        subset="coord",
        bounds=_XY,
        choices=_BTN,
    ),
    "mouse_up": _spec(
        (("x", _NUM), ("y", _NUM), ("button", _STR)),
        {"button": "left"},
        "release a mouse button at (x, y)",
        subset="coord",
        bounds=_XY,
        choices=_BTN,
    ),
    "mouse_click": _spec(
        (("x", _NUM), ("y", _NUM), ("button", _STR)),
        {"button": "left"},
        "click at (x, y)",
        subset="coord",
        bounds=_XY,
        choices=_BTN,
    ),
    "mouse_dblclick": _spec(
        (("x", _NUM), ("y", _NUM), ("button", _STR)),
        {"button": "left"},
        "double-click at (x, y)",
        subset="coord",
        bounds=_XY,
        choices=_BTN,
    ),
    "mouse_drag_and_drop": _spec(
        (("from_x", _NUM), ("from_y", _NUM), ("to_x", _NUM), ("to_y", _NUM)),
        {},
        "drag with the left button from one point to another",
        subset="coord",
        bounds={k: (-MAX_COORD, MAX_COORD) for k in ("from_x", "from_y", "to_x", "to_y")},
    ),
    "mouse_upload_file": _spec(
        (("x", _NUM), ("y", _NUM), ("file", _FILES)),
        {},
        "click at (x, y) and give the file chooser file(s)",
        subset="coord",
        bounds=_XY,
    ),
    "keyboard_down": _spec((("key", _STR),), {}, "hold a key down", subset="coord"),
    "keyboard_up": _spec((("key", _STR),), {}, "release a key", subset="coord"),
    "keyboard_press": _spec(
        (("key", _STR),), {}, "press a key or combination, e.g. 'Control+a'", subset="coord"
    ),
    "keyboard_type": _spec((("text", _STR),), {}, "type text key by key", subset="coord"),
    "keyboard_insert_text": _spec((("text", _STR),), {}, "insert text at the cursor at once", subset="coord"),
    # nav
    "goto": _spec((("url", _STR),), {}, "open a URL (only the task's sites)", subset="nav"),
    "go_back": _spec((), {}, "browser back", subset="nav"),
    "go_forward": _spec((), {}, "browser forward", subset="nav"),
    # tab
    "new_tab": _spec((), {}, "open a blank tab", subset="tab"),
    "tab_close": _spec(
        (), {}, "close the active tab (the last one is replaced by a blank tab)", subset="tab"
    ),
    "tab_focus": _spec((("index", (int,)),), {}, "switch to tab number index", subset="tab"),
    # chat / infeas / misc
    "send_msg_to_user": _spec((("text", _STR),), {}, "give the answer; ends the episode", subset="chat"),
    "report_infeasible": _spec(
        (("reason", _STR),), {}, "declare the task impossible; ends the episode", subset="infeas"
    ),
    "noop": _spec(
        (("wait_ms", _NUM),),
        {"wait_ms": None},
        "do nothing, waiting wait_ms (default: the env's noop_wait_ms)",
        subset="misc",
        bounds={"wait_ms": (0.0, MAX_WAIT_MS)},
    ),
}
BID_ACTIONS = {n for n, s in SPECS.items() if s.params and s.params[0][0] == "bid"}
BID_PARAMS = ("bid", "from_bid", "to_bid")
STOP_ACTIONS = ("send_msg_to_user", "report_infeasible")
MAX_ACTIONS = 10  # calls in one multi-action string
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


def _check_text(text: Any) -> str:
    if not isinstance(text, str):
        raise ActionError(f"an action is a string such as click('e12'), got {type(text).__name__}")
    src = text.strip()
    if not src:
        raise ActionError("empty action; write one call such as click('e12') or noop()")
    if len(src) > MAX_ACTION_CHARS:
        raise ActionError(f"action longer than {MAX_ACTION_CHARS} characters")
    return src


def parse_action(text: Any) -> Action:
    """Parse exactly one action call (nothing around it) into an :class:`Action`.

    Raises:
        ActionError: the string is not exactly one allowed call with literal arguments of the right types.
    """
    src = _check_text(text)
    try:
        tree = ast.parse(src, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise ActionError(f"cannot parse {src[:80]!r}: {getattr(exc, 'msg', exc)}") from exc
    return _call(tree.body, src)


_FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)```", re.S)
_TAG = re.compile(r"<action>(.*?)</action>", re.S | re.I)
_NAME_AT = re.compile(r"\b(" + "|".join(sorted(SPECS, key=len, reverse=True)) + r")\s*\(")


def parse_actions(text: Any, multiaction: bool = True) -> list[Action]:
    """Parse an agent's action text into the calls to run, in order, as BrowserGym accepts it.

    The text may be one call, several calls on separate lines or joined by ``;`` (BrowserGym's
    ``multiaction``), and may carry prose around them: the content of an ``<action>...</action>`` tag or
    of the last fenced code block is used when present; otherwise the calls are found in the text, each
    parsed on its own. Comments (``# ...``) are ignored. Nothing is ever executed.

    Args:
        text: the action text.
        multiaction: allow more than one call (BrowserGym's default ``True``).

    Raises:
        ActionError: no allowed call found, a call is malformed, or several calls with ``multiaction=False``.
    """
    src = _check_text(text)
    for pattern in (_TAG, _FENCE):
        found = [m.group(1).strip() for m in pattern.finditer(src) if m.group(1).strip()]
        if found:
            src = found[-1]
            break
    calls = _program(src)
    if calls is None:
        calls = _scan(src)
    if not calls:
        raise ActionError(
            f"no action found in {src[:80]!r}; write a call such as click('e12') or send_msg_to_user('42')"
        )
    if len(calls) > 1 and not multiaction:
        raise ActionError(f"{len(calls)} actions given; this env takes one per step (multiaction=False)")
    if len(calls) > MAX_ACTIONS:
        raise ActionError(f"{len(calls)} actions in one step; at most {MAX_ACTIONS}")
    stops = [i for i, a in enumerate(calls) if a.name in STOP_ACTIONS]
    if stops and stops[0] != len(calls) - 1:
        raise ActionError(f"{calls[stops[0]].name} ends the episode: put it last")
    return calls


def _program(src: str) -> list[Action] | None:
    """The calls of ``src`` if it is only calls (one per line or ``;``-separated), else ``None``; an
    allowed call with bad arguments raises."""
    try:
        tree = ast.parse(src, mode="exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not tree.body or not all(isinstance(st, ast.Expr) for st in tree.body):
        return None
    segment = ast.get_source_segment
    return [_call(st.value, segment(src, st.value) or src) for st in tree.body]  # type: ignore[attr-defined]


def _scan(src: str) -> list[Action]:
    """Calls of known actions found inside free text, each the shortest parsable ``name(...)``."""
    out: list[Action] = []
    failed: list[str] = []
    pos = 0
    while len(out) <= MAX_ACTIONS:
        m = _NAME_AT.search(src, pos)
        if m is None:
            break
        start, found = m.start(), None
        for end in range(m.end(), len(src) + 1):
            if src[end - 1] != ")":
                continue
            try:
                node = ast.parse(src[start:end], mode="eval").body
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                continue
            found = (node, end)
            break
        if found is None:  # prose that names an action ("click (the blue button)"): look further
            failed.append(src[start : start + 80])
            pos = m.end()
            continue
        out.append(_call(found[0], src[start : found[1]]))
        pos = found[1]
    if not out and failed:
        raise ActionError(
            f"cannot parse {failed[0]!r}: unbalanced brackets or arguments that are not literals"
        )
    return out


def _call(call: ast.AST, src: str) -> Action:
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
                args[pname] = copy.copy(spec.defaults[pname])
                continue
            raise ActionError(f"{name} needs {pname!r}: {name}({', '.join(names)})")
        value = args[pname]
        if pname in BID_PARAMS and isinstance(value, int) and not isinstance(value, bool):
            value = args[pname] = str(value)  # BrowserGym agents often write click(12)
        if isinstance(value, bool) and types != _BOOL:
            raise ActionError(f"{name}: {pname} must be {' or '.join(t.__name__ for t in types)}, got bool")
        if not isinstance(value, types):
            want = " or ".join(t.__name__ for t in types)
            raise ActionError(f"{name}: {pname} must be {want}, got {type(value).__name__}")
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise ActionError(f"{name}: {pname} must be a string or a list of strings")
        if isinstance(value, float) and not math.isfinite(value):
            raise ActionError(f"{name}: {pname} must be a finite number, got {value!r}")
        if pname in spec.bounds and isinstance(value, int | float):
            lo, hi = spec.bounds[pname]
            args[pname] = min(max(value, lo), hi)
        if pname in spec.choices and value not in spec.choices[pname]:
            raise ActionError(
                f"{name}: {pname} must be one of {', '.join(spec.choices[pname])}, got {value!r}"
            )
    if "modifiers" in args:
        bad = [m for m in args["modifiers"] if m not in MODIFIERS]
        if bad:
            raise ActionError(f"{name}: modifiers must be among {', '.join(MODIFIERS)}, got {bad}")
    for pname in BID_PARAMS:
        if pname in args:
            bid = args[pname].strip()
            if bid.isdigit():
                bid = "e" + bid  # BrowserGym-style numeric id: our ids are e<number>
            if not BID_RE.match(bid):
                raise ActionError(
                    f"{name}: {args[pname]!r} is not an element id; use an id shown as [e12] in the axtree"
                )
            args[pname] = bid
    ordered = {p: args[p] for p in names}
    return Action(name, ordered)
