"""World models without a neural network: *copy*, *nearest neighbour* and the *page memory*.

Every world model here has the interface the env uses: ``predict(batch) -> list[str]``, one Δ text
(:mod:`lynn.envs.worldmodel.delta`) per ``(goal, obs, action)`` of the batch.

- :class:`CopyModel` predicts no change (URL, title and page stay).
- :class:`NearestNeighbourModel` retrieves the most similar training transition — same action kind, a
  target element of the same role and name, a page of the same URL pattern, a similar goal — and
  returns *its* Δ (its hunks land on the current page through their anchor lines), transferred to the
  current step (``transfer=True``, :meth:`~NearestNeighbourModel.transferred`): the current link's URL
  where the neighbour followed its link, the neighbour's element/row/field/goal strings replaced by the
  current ones, and a neighbour that reloaded its page with few changes carried over as *edits* of the
  current page (:func:`edit_transfer`) rather than as its own page. Its hunks land on a page laid out a
  little differently (:func:`reanchor`: the anchor found under another element id, the written ids
  shifted with it), a typed or selected value is this step's (:func:`action_value`, :func:`selected`),
  and a filter or sort form's query keeps this page's path and takes its fields' values.
- :class:`PageMemory` keeps every page seen in training keyed by its URL (latest version wins). As a
  model on its own (:class:`MemoryModel`) it reads the next URL off the page (a link's ``/url:``, a
  ``goto``'s argument), answers with the remembered page when there is one, and falls back to the
  nearest neighbour's Δ otherwise; it also complements a learned model (:mod:`.model`).
"""

from __future__ import annotations

import ast
import copy
import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote_plus

from lynn.envs.worldmodel.delta import (
    Delta,
    action_target,
    compute_delta,
    page_frame,
    parse_delta,
    relative_url,
    strip_frame,
)

Item = tuple[str, dict[str, Any], str]  # (goal, obs, action)


class CopyModel:
    """Predicts that nothing changes."""

    name = "copy"

    def predict(self, batch: Sequence[Item]) -> list[str]:
        out = []
        for _goal, obs, action in batch:
            name = (action or "").split("(", 1)[0].strip() or "action"
            d = Delta(
                relative_url(str(obs.get("url", "")), str(obs.get("url", ""))),
                str(obs.get("title", "")),
                page_frame(str(obs.get("axtree", ""))),
                f"{name} -> no visible change",
            )
            out.append(d.to_text())
        return out


_DIGITS = re.compile(r"\d+")
_ACT_NAME = re.compile(r"^\s*(\w+)\s*\(")


def url_pattern(url: str) -> str:
    """``http://h:1/product/59?q=x`` -> ``/product/#?q``."""
    rel = re.sub(r"^https?://[^/]+", "", url)
    path, _, query = rel.partition("?")
    keys = ",".join(sorted(k.split("=", 1)[0] for k in query.split("&") if k))
    return _DIGITS.sub("#", path) + (f"?{keys}" if keys else "")


def element_block(axtree: str, bid: str) -> tuple[str, str]:
    """(the element's line without id and indentation, the first ``/url:`` in its subtree)."""
    lines = axtree.split("\n")
    tag = f"[{bid}] "
    for i, line in enumerate(lines):
        s = line.lstrip()
        if s.startswith(tag):
            depth = len(line) - len(s)
            url = ""
            for nxt in lines[i + 1 :]:
                ns = nxt.lstrip()
                if len(nxt) - len(ns) <= depth:
                    break
                if ns.startswith("/url: "):
                    url = ns[len("/url: ") :].strip()
                    break
            return s[len(tag) :].rstrip(":"), url
    return "", ""


def _features(goal: str, obs: dict[str, Any], action: str) -> dict[str, Any]:
    m = _ACT_NAME.match(action or "")
    bid = action_target(action)
    target, link = element_block(str(obs.get("axtree", "")), bid) if bid else ("", "")
    return {
        "act": m.group(1) if m else "",
        "url": url_pattern(str(obs.get("url", ""))),
        "target": _DIGITS.sub("#", target),
        "target_words": set(re.findall(r"\w+", target.lower())),
        "link": url_pattern(link) if link else "",
        "goal": set(re.findall(r"[a-z]+", goal.lower())),
    }


class NearestNeighbourModel:
    """Returns the Δ of the most similar training transition.

    Args:
        transitions: training transition records (:mod:`lynn.envs.worldmodel.data`).
        transfer: adapt the neighbour's Δ to the current step (see the module docstring); ``False`` gives
            the neighbour's Δ with only ids and an unchanged URL made relative (:meth:`adapted`).
    """

    name = "nearest"

    def __init__(self, transitions: Iterable[dict[str, Any]], transfer: bool = True) -> None:
        self.transfer = bool(transfer)
        self.rows = []
        for r in transitions:
            f = _features(r.get("goal", ""), r["obs"], r["action"])
            self.rows.append((f, r))
        if not self.rows:
            raise ValueError("the nearest-neighbour world model needs at least one training transition")
        self._deltas: dict[int, Delta] = {}

    @staticmethod
    def _sim(a: dict[str, Any], b: dict[str, Any]) -> float:
        s = 4.0 * (a["act"] == b["act"]) + 3.0 * (a["url"] == b["url"])
        tu = a["target_words"] | b["target_words"]
        s += 2.0 * (a["target"] == b["target"]) + 1.5 * (
            len(a["target_words"] & b["target_words"]) / len(tu) if tu else 1.0
        )
        s += 1.0 * (a["link"] == b["link"])
        union = a["goal"] | b["goal"]
        s += 1.0 * (len(a["goal"] & b["goal"]) / len(union) if union else 0.0)
        return s

    def neighbour(self, goal: str, obs: dict[str, Any], action: str) -> dict[str, Any]:
        """The most similar training transition (ties: the first recorded)."""
        f = _features(goal, obs, action)
        best = max(range(len(self.rows)), key=lambda i: (self._sim(f, self.rows[i][0]), -i))
        return self.rows[best][1]

    def delta_of(self, row: dict[str, Any]) -> Delta:
        key = id(row)
        if key not in self._deltas:
            d = compute_delta(row["obs"], row["action"], row["next_obs"])
            for h in d.hunks:
                h.removed = None  # the compact form a model writes: anchors, no removed lines
            self._deltas[key] = d
        return self._deltas[key]

    def adapted(self, obs: dict[str, Any], row: dict[str, Any]) -> Delta:
        """The neighbour's Δ, with what is relative in it made relative to ``obs``: a neighbour that stayed
        on its URL keeps this page's URL and title, and id prefixes advance as the neighbour's did."""
        d = copy.deepcopy(self.delta_of(row))
        f0 = page_frame(str(obs.get("axtree", "")))
        nf0, nf1 = (
            page_frame(str(row["obs"].get("axtree", ""))),
            page_frame(str(row["next_obs"].get("axtree", ""))),
        )
        if d.frame != "=":
            d.frame = f0 if nf1 == nf0 else next_frame(f0)
        if row["obs"].get("url") == row["next_obs"].get("url"):
            d.url = relative_url(str(obs.get("url", "")), str(obs.get("url", "")))
            if row["obs"].get("title") == row["next_obs"].get("title"):
                d.title = str(obs.get("title", ""))
        return d

    def transferred(self, goal: str, obs: dict[str, Any], action: str, row: dict[str, Any]) -> Delta:
        """:meth:`adapted`, then the neighbour's specifics swapped for this step's (analogy transfer): where
        the neighbour followed its element's link (or ``goto`` target), this step's link is the URL; the
        neighbour's strings of the acted-on element, its table row / list item, the page's field values
        and the goal's quoted values are replaced in the written lines by this step's counterparts."""
        d = self.adapted(obs, row)
        if not self.transfer:
            return d
        nb_url = relative_url(str(row["next_obs"].get("url", "")), str(row["obs"].get("url", "")))
        nb_link = predicted_url(row["obs"], row["action"])
        cur_link = predicted_url(obs, action)
        if nb_link and cur_link and nb_url == nb_link and d.url == nb_url:
            d.url = cur_link
        page = edit_transfer(obs, row) if self.transfer else None
        if page is not None:
            rel_obs = dict(obs, url=relative_url(str(obs.get("url", "")), str(obs.get("url", ""))))
            nxt = {"url": d.url, "title": d.title, "axtree": page}
            summary, d = d.summary, compute_delta(rel_obs, action, nxt)
            d.summary = summary
        subs = substitutions(
            context_strings(row.get("goal", ""), row["obs"], row["action"]),
            context_strings(goal, obs, action),
        )
        lines = strip_frame(str(obs.get("axtree", "")), page_frame(str(obs.get("axtree", "")))).split("\n")
        if subs:
            d.title = _substitute(d.title, subs) if d.title is not None else None
            d.summary = _substitute(d.summary, subs)
            for h in d.hunks:
                h.added = [_substitute(x, subs) for x in h.added]
                # The anchor too, when this page has the substituted line (a selected option's name).
                if h.anchor is not None and h.anchor not in lines:
                    h.anchor = _substitute(h.anchor, subs)
        d.url = _transfer_query(d.url, cur_link, row, obs, subs)
        if page is None:
            nb_ax = str(row["obs"].get("axtree", ""))
            reanchor(d, strip_frame(nb_ax, page_frame(nb_ax)).split("\n"), lines)
            nb_act = _ACT_NAME.match(row["action"] or "")
            chosen = selected(obs, action) if nb_act and nb_act.group(1) == "select_option" else None
            if chosen is not None:
                # The neighbour chose an option of its list in place: choose this step's option here.
                summary, title, url = d.summary, d.title, d.url
                d = compute_delta(obs, action, dict(obs, axtree=chosen))
                d.summary, d.title, d.url = summary, title, url
                for h in d.hunks:
                    h.removed = None
        return d

    def predict(self, batch: Sequence[Item]) -> list[str]:
        return [self.transferred(g, o, a, self.neighbour(g, o, a)).to_text() for g, o, a in batch]


_LINE_ID = re.compile(r"^(\s*)\[(f\d+)?e(\d+)\] ")
#: How much of its page (id-less lines) a neighbour must keep for its edits to be transferred as edits.
EDIT_RATIO = 0.8


def _keyed(axtree: str) -> list[tuple[str, int | None]]:
    """(line without its element id, the id's number) per line."""
    out: list[tuple[str, int | None]] = []
    for line in axtree.split("\n"):
        m = _LINE_ID.match(line)
        out.append((m.group(1) + line[m.end() :], int(m.group(3))) if m else (line, None))
    return out


def edit_transfer(obs: dict[str, Any], row: dict[str, Any]) -> str | None:
    """The next page as the neighbour's *edits* applied to this page, when the neighbour reloaded a page
    that kept most of its lines (a message after a form post, a re-sorted listing): the neighbour's lines
    compared without element ids (a new document renumbers them), its removals and insertions carried to
    the matching places of this page, this page's own lines kept, every id renumbered by the neighbour's
    offset at that place and given the next document's prefix. ``None`` when the neighbour stayed in its
    document (the anchored Δ does that) or replaced most of its page."""
    a_ax, b_ax = str(row["obs"].get("axtree", "")), str(row["next_obs"].get("axtree", ""))
    fa, fb = page_frame(a_ax), page_frame(b_ax)
    if fa == fb:
        return None
    a, b = _keyed(a_ax), _keyed(b_ax)
    sm = difflib.SequenceMatcher(None, [k for k, _ in a], [k for k, _ in b], autojunk=False)
    if sm.ratio() < EDIT_RATIO:
        return None
    keep = [False] * len(a)
    offset: list[int | None] = [None] * len(a)
    inserts: dict[int, list[tuple[str, int | None]]] = {}
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            for t in range(i2 - i1):
                na, nb = a[i1 + t][1], b[j1 + t][1]
                keep[i1 + t] = True
                offset[i1 + t] = nb - na if na is not None and nb is not None else None
        elif j2 > j1:
            inserts.setdefault(i1, []).extend(b[j1:j2])
    last = 0
    for i, o in enumerate(offset):
        offset[i] = last if o is None else o
        last = offset[i]
    cur_ax = str(obs.get("axtree", ""))
    c = _keyed(cur_ax)
    frame = next_frame(page_frame(cur_ax))
    cm = difflib.SequenceMatcher(None, [k for k, _ in c], [k for k, _ in a], autojunk=False)
    cmap = {
        i1 + t: j1 + t for tag, i1, i2, j1, _ in cm.get_opcodes() if tag == "equal" for t in range(i2 - i1)
    }

    def render(key: str, num: int | None) -> str:
        if num is None:
            return key
        body = key.lstrip()
        return f"{key[: len(key) - len(body)]}[{frame}e{num}] {body}"

    pending = sorted(inserts)
    out: list[str] = []
    last = -1
    for i, (key, num) in enumerate(c):
        k = cmap.get(i)
        pos = k if k is not None else last + 1  # this page's own lines sit after the last matched one
        while pending and pending[0] <= pos:
            out += [render(x, n) for x, n in inserts[pending.pop(0)]]
        if k is not None:
            last = k
            if not keep[k]:
                continue
        off = offset[min(pos, len(a) - 1)] or 0
        out.append(render(key, None if num is None else num + off))
    for p in pending:
        out += [render(x, n) for x, n in inserts[p]]
    return "\n".join(out)


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
# A field's value, after its state flags if any (the focused field: `textbox "Search products" [active]: lamp`).
_FIELD_VALUE = re.compile(r'^\s*\[[^\]]+\] (textbox|searchbox|spinbutton) "([^"]*)"(?: \[[^\]]*\])*: (.+)$')
_GOAL_VALUE = re.compile(r"“([^”]+)”|\"([^\"]+)\"|'([^']{2,})'|(\$?\d+(?:[.,]\d+)+|\$\d+)")
_CONTAINERS = ("row", "listitem", "article")
_ANY_FIELD = re.compile(r'^\s*\[[^\]]+\] (textbox|searchbox|spinbutton|combobox) "([^"]*)"[^:]*:?(?: (.+))?$')


def context_strings(goal: str, obs: dict[str, Any], action: str) -> dict[tuple, str]:
    """The strings that make one step specific, keyed by their place: the acted-on element's name and its
    row's (table row, list item, article) quoted strings in order, text field values by field, the goal's
    quoted values and numbers in order."""
    out: dict[tuple, str] = {}
    lines = str(obs.get("axtree", "")).split("\n")
    bid = action_target(action)
    tag = f"[{bid}] " if bid else None
    at = next((i for i, x in enumerate(lines) if tag and x.lstrip().startswith(tag)), None)
    if at is not None:
        name = _QUOTED.search(lines[at])
        if name and name.group(1):
            out[("target",)] = name.group(1)
        depth, lo = len(lines[at]) - len(lines[at].lstrip()), None
        for j in range(at - 1, max(-1, at - 40), -1):
            s = lines[j].lstrip()
            d = len(lines[j]) - len(s)
            if d < depth:
                depth = d
                role = re.sub(r"^\[[^\]]+\] ", "", s).split(" ", 1)[0].rstrip(":")
                if role in _CONTAINERS:
                    lo = j
                    break
        if lo is not None:
            k = 0
            base = len(lines[lo]) - len(lines[lo].lstrip())
            for x in lines[lo + 1 :]:
                if len(x) - len(x.lstrip()) <= base:
                    break
                for m in _QUOTED.finditer(x):
                    if m.group(1):
                        out[("row", k)] = m.group(1)
                        k += 1
    for x in lines:
        m = _FIELD_VALUE.match(x)
        if m:
            out[("field", m.group(1), m.group(2))] = m.group(3).strip()
    value = action_value(action)
    if value:
        out[("value",)] = value
    for k, m in enumerate(_GOAL_VALUE.finditer(goal or "")):
        v = next(g for g in m.groups() if g)
        out[("goal", k)] = v
    return out


def _fields(obs: dict[str, Any]) -> dict[str, str]:
    """Form fields' values by name, empty ones included: text fields, and a combobox's selected option."""
    out: dict[str, str] = {}
    box = None
    for x in str(obs.get("axtree", "")).split("\n"):
        m = _ANY_FIELD.match(x)
        if m:
            box = None
            if m.group(1) == "combobox":
                box = m.group(2)
            else:
                out[m.group(2)] = (m.group(3) or "").strip().removeprefix('"').removesuffix('"')
        elif box is not None and x.lstrip().startswith("option ") and x.rstrip().endswith("[selected]"):
            q = _QUOTED.search(x)
            out[box] = q.group(1) if q else ""
    return out


def _transfer_query(
    url: str | None, cur_link: str, row: dict[str, Any], obs: dict[str, Any], subs: list[tuple[str, str]]
) -> str | None:
    """The neighbour's next URL with this step's path where the neighbour only added a query to its own
    page (a sort or filter form), and the query's values those of this page's fields (URL-encoded)."""
    if url is None or url == cur_link or "?" not in url:
        return url
    path, _, query = url.partition("?")
    nb_path = relative_url(str(row["obs"].get("url", "")), str(row["obs"].get("url", ""))).partition("?")[0]
    cur_path = relative_url(str(obs.get("url", "")), str(obs.get("url", ""))).partition("?")[0]
    if path == nb_path:
        path = cur_path
    nb_f, cur_f = _fields(row["obs"]), _fields(obs)
    pairs = list(subs) + [(v, cur_f[k]) for k, v in nb_f.items() if k in cur_f and v and v != cur_f[k]]
    parts = []
    for kv in query.split("&"):
        k, eq, v = kv.partition("=")
        for a, b in pairs:
            if v == quote_plus(a):
                v = quote_plus(b)
                break
        parts.append(k + eq + v)
    return path + "?" + "&".join(parts)


def selected(obs: dict[str, Any], action: str) -> str | None:
    """This page with ``select_option``'s option marked ``[selected]`` in its list (the others not), or
    ``None`` for another action or an option the list does not have."""
    m = _ACT_NAME.match(action or "")
    value, bid = action_value(action), action_target(action)
    if not m or m.group(1) != "select_option" or not value or not bid:
        return None
    lines = str(obs.get("axtree", "")).split("\n")
    at = next((i for i, x in enumerate(lines) if x.lstrip().startswith(f"[{bid}] ")), None)
    if at is None:
        return None
    depth = len(lines[at]) - len(lines[at].lstrip())
    end = at + 1
    while end < len(lines) and len(lines[end]) - len(lines[end].lstrip()) > depth:
        end += 1
    opts = [i for i in range(at + 1, end) if lines[i].lstrip().startswith("option ")]
    names = {i: (_QUOTED.search(lines[i]) or [None, None])[1] for i in opts}
    if value not in names.values():
        return None
    for i in opts:
        bare = lines[i].removesuffix(" [selected]")
        lines[i] = bare + " [selected]" if names[i] == value else bare
    return "\n".join(lines)


def action_value(action: str) -> str:
    """The value an action types or selects (``fill('e16', 'blue kettle')`` -> ``blue kettle``), else ``""``."""
    m = _ACT_NAME.match(action or "")
    if not m or m.group(1) not in ("fill", "select_option", "type"):
        return ""
    try:
        args = ast.literal_eval("(" + action[m.end() :].rstrip().removesuffix(")") + ",)")
    except (ValueError, SyntaxError):
        return ""
    value = args[1] if len(args) > 1 else ""
    return value if isinstance(value, str) else (value[0] if value and isinstance(value[0], str) else "")


_ANY_ID = re.compile(r"\[(f\d+)?e(\d+)\]")


def _no_ids(line: str) -> str:
    return _ANY_ID.sub("[e]", line)


def reanchor(d: Delta, nb_lines: list[str], lines: list[str]) -> None:
    """Land the neighbour's hunks on this page when its page is laid out a little differently: an anchor
    not on this page is looked for without element ids (the same heading under another id, the header
    having more or fewer elements), the hunk moves there and its written ids shift by the difference
    (a new document numbers in page order); a hunk that removed the neighbour's page to its end removes
    this page to its end. Hunks that still do not land are left for :func:`apply_delta` to report."""
    bare = [_no_ids(x) for x in lines]
    pos = 0
    for h in d.hunks:
        to_end = h.start + h.count == len(nb_lines)
        if h.anchor is not None and h.anchor not in lines[pos:]:
            key = _no_ids(h.anchor)
            cands = [i for i in range(pos, len(lines)) if bare[i] == key]
            if cands:
                at = min(cands, key=lambda i: abs(i - h.start))
                a, b = _ANY_ID.search(h.anchor), _ANY_ID.search(lines[at])
                shift = int(b.group(2)) - int(a.group(2)) if a and b else 0
                if shift:
                    h.added = [
                        _ANY_ID.sub(lambda m, s=shift: f"[{m.group(1) or ''}e{int(m.group(2)) + s}]", x)
                        for x in h.added
                    ]
                h.start, h.anchor = at, lines[at]
        if to_end and h.start <= len(lines):
            h.count = len(lines) - h.start
        pos = min(h.start + h.count, len(lines))


def substitutions(nb: dict[tuple, str], cur: dict[tuple, str]) -> list[tuple[str, str]]:
    """(neighbour string, this step's string) pairs for the places both have, longest first; a neighbour
    string mapped to two different strings is dropped (ambiguous)."""
    pairs: dict[str, str | None] = {}
    for key, a in nb.items():
        b = cur.get(key)
        if b is None or a == b or len(a) < 2:
            continue
        pairs[a] = b if pairs.get(a, b) == b else None
    return sorted(((a, b) for a, b in pairs.items() if b is not None), key=lambda p: -len(p[0]))


def _substitute(text: str, subs: list[tuple[str, str]]) -> str:
    if not text:
        return text
    pat = re.compile("|".join(re.escape(a) for a, _ in subs))
    table = dict(subs)
    return pat.sub(lambda m: table[m.group(0)], text)


def next_frame(frame: str) -> str:
    """The id prefix of the document after a navigation from one with prefix ``frame``."""
    return f"f{int(frame[1:]) + 1}" if frame.startswith("f") and frame[1:].isdigit() else "f1"


class PageMemory:
    """Pages seen in training keyed by URL (relative to the site's origin, id prefix removed).

    A URL can have been seen in several states (a wishlist before and after a removal, a cart): every
    distinct version is kept, and :meth:`get` with a goal returns the one that shows most of the goal's
    words (ties: the last seen, which is what :meth:`get` without a goal returns)."""

    def __init__(self, transitions: Iterable[dict[str, Any]] = ()) -> None:
        self.pages: dict[str, tuple[str, str]] = {}
        self.versions: dict[str, list[tuple[str, str]]] = {}
        #: (URL, page) -> the (last) training transition that arrived at that page.
        self.arrivals: dict[tuple[str, tuple[str, str]], dict[str, Any]] = {}
        self._word_sets: dict[tuple[str, str], frozenset[str]] = {}
        #: URL of the page whose level-1 heading is a name (a product's, a post's, a user's): first seen.
        self.by_heading: dict[str, str] = {}
        for r in transitions:
            # Pages as they look on arrival (the next page of a navigation), not after the agent typed.
            if r["obs"].get("url") != r["next_obs"].get("url") or page_frame(
                str(r["obs"].get("axtree", ""))
            ) != page_frame(str(r["next_obs"].get("axtree", ""))):
                self.add(r["next_obs"], r)

    def add(self, obs: dict[str, Any], arrival: dict[str, Any] | None = None) -> None:
        """Remember ``obs`` (a page on arrival); ``arrival`` is the transition that led there, if known."""
        url = relative_url(str(obs.get("url", "")), str(obs.get("url", "")))
        ax = str(obs.get("axtree", ""))
        page = (str(obs.get("title", "")), strip_frame(ax, page_frame(ax)))
        self.pages[url] = page
        if arrival is not None:
            self.arrivals[(url, page)] = arrival
        seen = self.versions.setdefault(url, [])
        if page in seen:
            seen.remove(page)
        seen.append(page)
        name = heading_of(page[1])
        if name:
            self.by_heading.setdefault(name, url)

    def get(self, url: str, goal: str = "") -> tuple[str, str] | None:
        """(title, frame-free axtree) of the page at ``url`` (relative), or None; with ``goal``, the
        remembered version of that page that shows most of the goal's words."""
        seen = self.versions.get(url)
        if not goal or not seen or len(seen) == 1:
            return self.pages.get(url)
        return self.choose(seen, goal)

    def choose(self, seen: Sequence[tuple[str, str]], goal: str) -> tuple[str, str]:
        """The version (of ``seen``, oldest first) that shows most of the goal's words; ties: the last."""
        words = {w for w in re.findall(r"[a-z0-9]+", goal.lower()) if len(w) > 3}
        scores = [len(words & self._words(page)) for page in seen]
        return seen[max(range(len(seen)), key=lambda i: (scores[i], i))]

    def _words(self, page: tuple[str, str]) -> frozenset[str]:
        # A page's words, read once: imagination asks for the same versions at every step.
        if page not in self._word_sets:
            self._word_sets[page] = frozenset(re.findall(r"[a-z0-9]+", page[1].lower()))
        return self._word_sets[page]

    def __len__(self) -> int:
        return len(self.pages)

    def replace_page(self, obs: dict[str, Any], delta_text: str, action: str) -> str:
        """``delta_text`` with its page edits replaced by the remembered page of its URL, when the Δ leaves
        the current URL and that page is remembered; otherwise ``delta_text`` unchanged."""
        try:
            d = parse_delta(delta_text)
        except ValueError:
            return delta_text
        cur = relative_url(str(obs.get("url", "")), str(obs.get("url", "")))
        hit = self.get(d.url)
        if d.url == cur or hit is None:
            return delta_text
        return self.delta_to(obs, action, d.url, hit, d.summary, d.frame).to_text()

    @staticmethod
    def delta_to(
        obs: dict[str, Any],
        action: str,
        url: str,
        page: tuple[str, str],
        summary: str | None,
        frame: str | None,
    ) -> Delta:
        ax0 = str(obs.get("axtree", ""))
        f1 = frame if frame and frame != page_frame(ax0) else next_frame(page_frame(ax0))
        title, ax = page
        nxt = {"url": url, "title": title, "axtree": ax if not f1 else _with_frame(ax, f1)}
        rel_obs = dict(obs, url=relative_url(str(obs.get("url", "")), str(obs.get("url", ""))))
        d = compute_delta(rel_obs, action, nxt)
        if summary is not None:
            d.summary = summary
        return d


def _with_frame(ax: str, frame: str) -> str:
    from lynn.envs.worldmodel.delta import add_frame

    return add_frame(ax, frame)


class MemoryModel:
    """The page memory as a world model: the next URL read off the page, the remembered page for it, and
    the nearest neighbour's Δ where memory has nothing.

    Args:
        transitions: training transitions (memory and neighbours).
    """

    name = "memory"

    def __init__(self, transitions: Iterable[dict[str, Any]]) -> None:
        rows = list(transitions)
        self.nn = NearestNeighbourModel(rows)
        self.memory = PageMemory(rows)

    def predict(self, batch: Sequence[Item]) -> list[str]:
        out = []
        for goal, obs, action in batch:
            nn_text = self.nn.transferred(goal, obs, action, self.nn.neighbour(goal, obs, action)).to_text()
            url = predicted_url(obs, action)
            name = (action or "").split("(", 1)[0].strip()
            bid = action_target(action)
            target = element_block(str(obs.get("axtree", "")), bid)[0] if bid else ""
            if url and name == "click":
                url, page = self._followed(goal, obs, action, url, target)
            else:
                page = self.memory.get(url, goal) if url else None
            cur = relative_url(str(obs.get("url", "")), str(obs.get("url", "")))
            if url and url != cur and page is not None:
                summary = f"{name} {target}".strip() + f' -> opened {url} "{page[0]}"'
                out.append(PageMemory.delta_to(obs, action, url, page, summary, None).to_text())
            else:
                out.append(nn_text)
        return out

    def _followed(
        self, goal: str, obs: dict[str, Any], action: str, url: str, target: str
    ) -> tuple[str, tuple[str, str] | None]:
        """The page a clicked link leads to. The link's URL may be a neighbour's, carried into an imagined page
        with the neighbour's names swapped for this step's (a search result, a list): so a link whose name
        titles a remembered page leads there (that page is known) when it was seen signed in as this page is
        (the same banner: an author's post page has an Edit link another user's has not), and otherwise a
        remembered page titled with another name shows the link's name instead (the neighbour's page
        transferred, as the Δ's names are). A remembered page reached in training from another row (an Edit link's
        product row, the link's URL a neighbour's): the strings of the row that led there in training
        are swapped for this row's, as the nearest neighbour's Δ is transferred (the same row swaps nothing)."""
        link = _QUOTED.search(target)
        name = link.group(1) if link else ""
        # The versions of the page reached by clicking the same kind of element (an "Edit" link, not "Save").
        alike = [v for v in self.memory.versions.get(url, []) if self._arrived_by(url, v) == target]
        page = self.memory.choose(alike, goal) if alike else self.memory.get(url, goal)
        if page is None:
            return url, page
        if name and name not in page[1]:
            known = self.memory.by_heading.get(name)
            if known is not None:
                mine = banner_of(str(obs.get("axtree", "")))
                same = [v for v in self.memory.versions.get(known, []) if banner_of(v[1]) == mine]
                if same:
                    return known, same[-1]
        page = self._carried(goal, obs, action, url, page)
        if not name or name in page[1]:
            return url, page
        other = heading_of(page[1])
        if not other or other == name or len(other) < 3:
            return url, page
        return url, (page[0].replace(other, name), page[1].replace(other, name))

    def _arrived_by(self, url: str, page: tuple[str, str]) -> str | None:
        """The line (no id) of the element whose click arrived at this version of the page in training."""
        arrival = self.memory.arrivals.get((url, page))
        bid = action_target(arrival["action"]) if arrival else ""
        return element_block(str(arrival["obs"].get("axtree", "")), bid)[0] if arrival and bid else None

    def _carried(
        self, goal: str, obs: dict[str, Any], action: str, url: str, page: tuple[str, str]
    ) -> tuple[str, str]:
        arrival = self.memory.arrivals.get((url, page))
        bid = action_target(action)
        if (
            arrival is None
            or not bid
            or self._arrived_by(url, page) != element_block(str(obs.get("axtree", "")), bid)[0]
        ):
            return page  # rows are only comparable when the same kind of element was clicked
        before = context_strings(arrival.get("goal", ""), arrival["obs"], arrival["action"])
        # The same row (the same product) gives no pairs; only strings the page shows are swapped.
        subs = [(a, b) for a, b in substitutions(before, context_strings(goal, obs, action)) if a in page[1]]
        if not subs:
            return page
        return _substitute(page[0], subs), _substitute(page[1], subs)


def banner_of(axtree: str) -> list[str]:
    """The page's lines before its main content, without element ids (who is signed in, the cart's count)."""
    out = []
    for line in axtree.split("\n"):
        if line.lstrip().startswith("[") and line.rstrip().endswith(" main:"):
            break
        out.append(_no_ids(line))
    return out


def heading_of(axtree: str) -> str:
    """The text of a page's first level-1 heading (a product's, a post's, a user's name), or ``""``."""
    m = re.search(r'heading "((?:[^"\\]|\\.)*)" \[level=1\]', axtree)
    return m.group(1) if m else ""


def predicted_url(obs: dict[str, Any], action: str) -> str:
    """The URL an action leads to when the page says it (a link's ``/url:``, ``goto``), else ``""``."""
    m = _ACT_NAME.match(action or "")
    name = m.group(1) if m else ""
    if name == "goto":
        arg = re.match(r"""^\s*goto\(\s*['"]([^'"]*)['"]""", action)
        return relative_url(arg.group(1), str(obs.get("url", ""))) if arg else ""
    if name == "click":
        bid = action_target(action)
        _, link = element_block(str(obs.get("axtree", "")), bid) if bid else ("", "")
        if link.startswith("/"):
            return link
        if link.startswith("http"):
            return relative_url(link, str(obs.get("url", "")))
    return ""
