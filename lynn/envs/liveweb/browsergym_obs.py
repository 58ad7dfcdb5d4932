"""BrowserGym's structured observation keys, for ``LiveWebEnv(obs_format="browsergym")``.

BrowserGym (``browsergym.core.observation``) gives an agent, besides the goal and the URL, Chromium's
own accessibility tree (``axtree_object``: the result of CDP ``Accessibility.getFullAXTree``), the DOM
snapshot (``dom_object``: CDP ``DOMSnapshot.captureSnapshot``) and per-element properties
(``extra_element_properties``: ``{bid: {"visibility", "bbox", "clickable", "set_of_marks"}}``), with
every element that has an id carrying it as ``browsergym_id``. AgentLab's prompt building starts from
``axtree_object``. This module builds the same structures from the same CDP calls; the element ids
are LiveWeb's (``e12``, the ids of the text ``axtree`` that actions take), attached to the CDP nodes by
matching the aria snapshot's (role, name) sequence against the tree in document order.

It costs two CDP calls a step (≈ 20–60 ms on a local page), so it is opt-in.
"""

from __future__ import annotations

import re
from typing import Any

_LINE = re.compile(r'^\s*(?:- )?\[(?P<bid>[a-z0-9]+)\] (?P<role>[a-z]+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?')
CLICKABLE = {
    "button",
    "link",
    "checkbox",
    "radio",
    "combobox",
    "textbox",
    "searchbox",
    "menuitem",
    "option",
    "tab",
    "switch",
    "slider",
    "spinbutton",
    "listbox",
}


def _ordered(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The nodes in document (pre-)order, from their parent/child links."""
    by_id = {n["nodeId"]: n for n in nodes}
    roots = [n for n in nodes if "parentId" not in n or n["parentId"] not in by_id]
    out: list[dict[str, Any]] = []
    stack = list(reversed(roots))
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed([by_id[c] for c in n.get("childIds", []) if c in by_id]))
    return out


def _value(field: Any) -> str:
    return str(field.get("value", "")) if isinstance(field, dict) else ""


def tag_bids(axtree_text: str, nodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Attach each id of the text axtree to the CDP node of the same role and name, in document order
    (sets ``node["browsergym_id"]``); returns bid -> node."""
    order = [n for n in _ordered(nodes) if not n.get("ignored")]
    wanted = [
        (m["bid"], m["role"], (m["name"] or "").replace('\\"', '"'))
        for m in map(_LINE.match, axtree_text.splitlines())
        if m
    ]
    out: dict[str, dict[str, Any]] = {}
    i = 0
    for bid, role, name in wanted:
        if role == "generic" or (not name and role not in CLICKABLE):
            continue  # too common to place by role alone: matching it could skip the real ones
        for j in range(i, len(order)):
            n = order[j]
            if _value(n.get("role")).lower() == role and _value(n.get("name")) == name:
                n["browsergym_id"] = bid
                out[bid] = n
                i = j + 1
                break
    return out


def _bounds(snapshot: dict[str, Any]) -> dict[int, list[float]]:
    """backendNodeId -> [x, y, w, h] of the top document's laid-out nodes."""
    if not snapshot.get("documents"):
        return {}
    doc = snapshot["documents"][0]
    backend = doc["nodes"].get("backendNodeId", [])
    layout = doc.get("layout", {})
    out: dict[int, list[float]] = {}
    for idx, rect in zip(layout.get("nodeIndex", []), layout.get("bounds", []), strict=False):
        if idx < len(backend):
            out[backend[idx]] = [float(v) for v in rect]
    return out


def element_properties(
    bid_nodes: dict[str, dict[str, Any]], snapshot: dict[str, Any], viewport: tuple[int, int]
) -> dict[str, dict[str, Any]]:
    """BrowserGym's ``extra_element_properties``: visibility (0/1: laid out with an area inside the
    viewport), bbox ``[x, y, w, h]`` (``None`` if not laid out), clickable (by role) and set_of_marks
    (clickable and visible)."""
    bounds = _bounds(snapshot)
    w, h = viewport
    sx = (
        float(snapshot.get("documents", [{}])[0].get("scrollOffsetX", 0) or 0)
        if snapshot.get("documents")
        else 0.0
    )
    sy = (
        float(snapshot.get("documents", [{}])[0].get("scrollOffsetY", 0) or 0)
        if snapshot.get("documents")
        else 0.0
    )
    out: dict[str, dict[str, Any]] = {}
    for bid, node in bid_nodes.items():
        box = bounds.get(node.get("backendDOMNodeId", -1))
        if box is not None:
            box = [box[0] - sx, box[1] - sy, box[2], box[3]]  # layout bounds are in page coordinates
        visible = bool(
            box
            and box[2] > 0
            and box[3] > 0
            and box[0] < w
            and box[1] < h
            and box[0] + box[2] > 0
            and box[1] + box[3] > 0
        )
        clickable = _value(node.get("role")).lower() in CLICKABLE
        out[bid] = {
            "visibility": 1.0 if visible else 0.0,
            "bbox": box,
            "clickable": clickable,
            "set_of_marks": clickable and visible,
        }
    return out


def focused_bid(bid_nodes: dict[str, dict[str, Any]]) -> str:
    for bid, node in bid_nodes.items():
        for prop in node.get("properties", []):
            if prop.get("name") == "focused" and prop.get("value", {}).get("value"):
                return bid
    return ""


def capture(cdp: Any, axtree_text: str, viewport: tuple[int, int]) -> dict[str, Any]:
    """``axtree_object``, ``dom_object``, ``extra_element_properties`` and ``focused_element_bid`` of
    the page behind ``cdp`` (a CDP session)."""
    ax = cdp.send("Accessibility.getFullAXTree")
    dom = cdp.send(
        "DOMSnapshot.captureSnapshot",
        {"computedStyles": [], "includeDOMRects": True, "includePaintOrder": True},
    )
    bid_nodes = tag_bids(axtree_text, ax.get("nodes", []))
    return {
        "axtree_object": ax,
        "dom_object": dom,
        "extra_element_properties": element_properties(bid_nodes, dom, viewport),
        "focused_element_bid": focused_bid(bid_nodes),
    }
