"""Candidate ranking for LiveWeb (Mind2Web's MindAct, step one): the page's elements against the goal.

A LiveWeb page is an accessibility tree of a few hundred lines; a 4M-parameter LM with a 768-token
context cannot read it whole, and the old prompt kept the tree's *first* lines wherever the element to act
on was. :func:`parse_page` turns the axtree into :class:`Element` units (one per ``[id]`` line, with the
id-less lines under it, ``text: $25.31`` or a combobox's ``option`` lines, as its context);
:class:`WebRanker` scores each unit against the goal and the last actions and keeps the top ``k``.

The score is a logistic regression over a few lexical and structural features (:func:`features`):
BM25 of the goal's words in the unit's text, whether the unit's name occurs verbatim in the goal, its
role, whether it was acted on in the history, whether it sits just after the element last acted on (the
``Go`` button after the search box), whether it holds a ``Label: value`` reading. :data:`DEFAULT_WEIGHTS`
is a lexical prior that works without training; :meth:`WebRanker.fit` learns the weights on the
expert's train-split steps (its element as the positive, every other unit of the page a negative).
:func:`recall_at_k` measures it on held-out steps.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_LINE = re.compile(
    r'^(?P<indent>\s*)\[(?P<ref>[A-Za-z0-9]+)\] (?P<role>[a-z]+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?'
    r"(?P<attrs>(?: \[[^\]]*\])*)(?::\s?(?P<value>.*))?$"
)
_WORD = re.compile(r"[a-z0-9$#@.\-]+")
_STOP = frozenset(
    "the a an of in on to for and or is was what which who how many much did does do by with at from "
    "this that it its as be are were has have their they them you i".split()
)
#: Roles an action targets; other units are context (text the answer is read from).
ACTIONABLE = ("link", "button", "textbox", "searchbox", "combobox", "spinbutton", "checkbox", "radio", "tab")
ROLE_PRIOR = {
    "textbox": 1.0,
    "searchbox": 1.0,
    "combobox": 0.8,
    "button": 0.7,
    "spinbutton": 0.4,
    "checkbox": 0.4,
}
FEATURES = (
    "bm25",
    "name_in_goal",
    "goal_cover",
    "role_prior",
    "actionable",
    "acted_before",
    "after_last",
    "labelled_value",
    "has_number",
    "nav_banner",
    "name_prior",
    "role_rate",
    "bias",
)
#: Hand-set weights used before (or instead of) fitting: lexical match first, structure second.
DEFAULT_WEIGHTS = (1.0, 3.0, 2.0, 0.8, 0.5, -1.0, 1.5, 0.5, 0.2, -0.5, 0.0, 0.0, 0.0)


def words(text: str) -> list[str]:
    """Lower-cased content words of ``text`` (stop words dropped; ``$11.64`` and ``#146`` kept whole)."""
    out = []
    for w in _WORD.findall(text.lower().replace("“", " ").replace("”", " ")):
        w = w.strip(".-")
        if w and w not in _STOP:
            out.append(w)
    return out


@dataclass
class Element:
    """One unit of a page: an ``[id]`` line and the id-less lines under it.

    Attributes:
        ref: the element id (``f2e23``).
        role: its role (``link``, ``textbox``, ``paragraph`` ...).
        name: its accessible name (may be empty).
        value: the text after ``:`` on its line (a textbox's content, a paragraph's text).
        texts: the id-less lines under it (``text: $25.31``, ``option "Books"``; ``/url:`` lines dropped).
        options: a combobox's option labels.
        index: its position among the page's units.
        depth: its indentation.
        in_banner: it lies in the page's banner/navigation (the same on every page).
    """

    ref: str
    role: str
    name: str
    value: str = ""
    texts: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    index: int = 0
    depth: int = 0
    in_banner: bool = False

    def text(self) -> str:
        """Everything the unit says (name, value and context lines)."""
        return " ".join(x for x in (self.name, self.value, *self.texts) if x)

    def line(self, max_chars: int = 120) -> str:
        """The unit as one short prompt line: ``link "Halcyon Smart Notebook"``, ``paragraph: Price: $11.64``."""
        s = self.role + (f' "{self.name}"' if self.name else "")
        if self.value:
            s += f": {self.value}"
        if self.texts:
            s += " | " + " | ".join(self.texts)
        return s if len(s) <= max_chars else s[: max_chars - 1] + "…"


def parse_page(axtree: str) -> list[Element]:
    """The units of a LiveWeb axtree, in page order."""
    out: list[Element] = []
    banner_depth: int | None = None
    for raw in axtree.splitlines():
        m = _LINE.match(raw)
        if m:
            depth = len(m.group("indent"))
            role = m.group("role")
            if banner_depth is not None and depth <= banner_depth:
                banner_depth = None
            if role == "banner" and banner_depth is None:
                banner_depth = depth
            value = (m.group("value") or "").strip().strip('"')
            out.append(
                Element(
                    ref=m.group("ref"),
                    role=role,
                    name=(m.group("name") or "").replace('\\"', '"'),
                    value=value,
                    index=len(out),
                    depth=depth,
                    in_banner=banner_depth is not None and role != "banner",
                )
            )
            continue
        s = raw.strip()
        if not s or not out or s.startswith("/url:"):
            continue
        opt = re.match(r'^option "((?:[^"\\]|\\.)*)"', s)
        if opt:
            out[-1].options.append(opt.group(1))
            continue
        if s.startswith("text:"):
            s = s[5:].strip().strip('"')
        out[-1].texts.append(s)
    return out


def children_of(page: Sequence[Element]) -> dict[int, list[Element]]:
    """Each unit's direct children in page order, by the parent's ``index`` (-1: the top level), read off the
    indentation."""
    out: dict[int, list[Element]] = {}
    stack: list[Element] = []
    for e in page:
        while stack and stack[-1].depth >= e.depth:
            stack.pop()
        out.setdefault(stack[-1].index if stack else -1, []).append(e)
        stack.append(e)
    return out


def subtree(e: Element, page: Sequence[Element]) -> list[Element]:
    """``e`` and every unit under it, in page order."""
    out = [e]
    for x in page[e.index + 1 :]:
        if x.depth <= e.depth:
            break
        out.append(x)
    return out


def count_readings(page: Sequence[Element]) -> dict[str, list[str]]:
    """The counts a "how many" question may ask, read off the page's structure rather than its text: for every
    unit outside the banner, how many direct children of each role it has, as ``{"3": ["count:rowgroup#1>row",
    ...]}`` (the parent named by its role and its rank among units of that role). A table's header rows (rows
    of ``columnheader`` cells) are not counted, and a table also counts the body rows of all its row groups.
    An empty list is no reading (0 is not counted: nothing on the page shows it)."""
    kids = children_of(page)
    seen: Counter[str] = Counter()
    rank: dict[int, int] = {}
    for e in page:
        rank[e.index] = seen[e.role]
        seen[e.role] += 1

    def header(row: Element) -> bool:
        return any(c.role == "columnheader" for c in kids.get(row.index, []))

    out: dict[str, list[str]] = {}
    for e in page:
        if e.in_banner or e.role == "banner":
            continue
        by_role: Counter[str] = Counter(
            c.role for c in kids.get(e.index, []) if not (c.role == "row" and header(c))
        )
        if e.role == "table":
            body = [x for x in subtree(e, page)[1:] if x.role == "row" and not header(x)]
            if body:
                out.setdefault(str(len(body)), []).append(f"count:table#{rank[e.index]}>row*")
        for role, n in by_role.items():
            if e.role == "rowgroup":  # its table counts its rows
                continue
            out.setdefault(str(n), []).append(f"count:{e.role}#{rank[e.index]}>{role}")
    return out


_ACTION_REF = re.compile(r"^\s*[a-z_]+\(\s*['\"]([A-Za-z0-9]+)['\"]")


def action_ref(action: str) -> str | None:
    """The element id an action string targets (``click('e12')`` -> ``e12``), or None."""
    m = _ACTION_REF.match(str(action))
    return m.group(1) if m else None


def _bm25(query: list[str], docs: list[list[str]], k1: float = 1.2, b: float = 0.75) -> list[float]:
    n = len(docs) or 1
    avg = sum(len(d) for d in docs) / n or 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    out = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for q in sorted(set(query)):  # a fixed order: the same sums in every process
            if q in tf:
                idf = math.log(1 + (n - df[q] + 0.5) / (df[q] + 0.5))
                s += idf * tf[q] * (k1 + 1) / (tf[q] + k1 * (1 - b + b * len(d) / avg))
        out.append(s)
    return out


def _key(e: Element) -> str:
    """What identifies a unit across instances: role and name with digits and ``$`` amounts masked."""
    return e.role + " " + re.sub(r"[\d$.,]+", "#", e.name.split(" by ")[0] if e.role == "article" else e.name)


def features(
    goal: str,
    page: Sequence[Element],
    history: Sequence[str] = (),
    priors: dict[str, dict[str, float]] | None = None,
) -> list[list[float]]:
    """One feature row (:data:`FEATURES`) per unit of ``page`` for ``goal`` after the actions ``history``.

    ``priors`` (learned by :meth:`WebRanker.fit` on train steps): ``name`` maps a unit key (:func:`_key`)
    and ``role`` a role to the smoothed rate at which the expert needed such a unit when it was on the page.
    """
    priors = priors or {"name": {}, "role": {}}
    q = words(goal)
    qset = set(q)
    docs = [words(e.text()) for e in page]
    bm = _bm25(q, docs)
    top = max(bm) if bm and max(bm) > 0 else 1.0
    goal_l = goal.lower()
    acted = {action_ref(a) for a in history} - {None}
    last = action_ref(history[-1]) if history else None
    last_i = next((e.index for e in page if e.ref == last), None)
    rows = []
    for e, d, s in zip(page, docs, bm, strict=True):
        name_in_goal = bool(e.name) and len(e.name) > 2 and e.name.lower() in goal_l
        cover = len(set(d) & qset) / len(qset) if qset else 0.0
        after_last = last_i is not None and 0 < e.index - last_i <= 2 and e.role in ACTIONABLE
        rows.append(
            [
                s / top,
                float(name_in_goal),
                cover,
                ROLE_PRIOR.get(e.role, 0.0),
                float(e.role in ACTIONABLE),
                float(e.ref in acted),
                float(after_last),
                float(bool(re.search(r"\b[A-Z][a-z ]+: \S", e.text()))),
                float(bool(re.search(r"\d", e.text()))),
                float(e.in_banner),
                priors["name"].get(_key(e), 0.0),
                priors["role"].get(e.role, 0.0),
                1.0,
            ]
        )
    return rows


class WebRanker:
    """Scores a page's units for a goal and history; keeps the top ``k`` (page order kept among them).

    Args:
        weights: one weight per :data:`FEATURES` (default :data:`DEFAULT_WEIGHTS`).
    """

    def __init__(
        self, weights: Sequence[float] | None = None, priors: dict[str, dict[str, float]] | None = None
    ) -> None:
        self.weights = list(weights or DEFAULT_WEIGHTS)
        self.priors = priors or {"name": {}, "role": {}}
        if len(self.weights) != len(FEATURES):
            raise ValueError(f"need {len(FEATURES)} weights ({', '.join(FEATURES)}), got {len(self.weights)}")

    def scores(self, goal: str, page: Sequence[Element], history: Sequence[str] = ()) -> list[float]:
        return [
            sum(w * x for w, x in zip(self.weights, r, strict=True))
            for r in features(goal, page, history, self.priors)
        ]

    def rank(self, goal: str, page: Sequence[Element], history: Sequence[str] = ()) -> list[Element]:
        """``page``'s units, best first (ties in page order)."""
        s = self.scores(goal, page, history)
        order = sorted(range(len(page)), key=lambda i: (-s[i], i))
        return [page[i] for i in order]

    def top(
        self, goal: str, page: Sequence[Element], history: Sequence[str] = (), k: int = 12
    ) -> list[Element]:
        """The ``k`` best units, in page order (so the prompt reads like the page)."""
        best = self.rank(goal, page, history)[:k]
        return sorted(best, key=lambda e: e.index)

    def fit(
        self, steps: Iterable[dict[str, Any]], epochs: int = 300, lr: float = 0.5, l2: float = 1e-3
    ) -> WebRanker:
        """Learn the weights by logistic regression on expert steps.

        Args:
            steps: dicts with ``goal``, ``axtree``, ``history`` (earlier actions) and ``action`` (the
                expert's); steps whose action targets no unit (answers read anywhere, ``goto``) add, as
                positives, the units that hold the answer text when ``answer`` is given.
        """
        import numpy as np

        steps = list(steps)
        seen: dict[str, Counter[str]] = {"name": Counter(), "role": Counter()}
        hit: dict[str, Counter[str]] = {"name": Counter(), "role": Counter()}
        pages = []
        for st in steps:
            page = parse_page(st["axtree"])
            pos = positives(st, page)
            pages.append((page, pos))
            if not pos:
                continue
            for kind, keys in (("name", {_key(e) for e in page}), ("role", {e.role for e in page})):
                seen[kind].update(keys)
            for kind, keys in (
                ("name", {_key(e) for e in page if e.ref in pos}),
                ("role", {e.role for e in page if e.ref in pos}),
            ):
                hit[kind].update(keys)
        # Smoothed hit rates (a unit seen 3 times and needed 3 times scores 0.75, never seen scores 0).
        self.priors = {k: {key: hit[k][key] / (seen[k][key] + 1) for key in hit[k]} for k in seen}
        xs, ys = [], []
        for st, (page, pos) in zip(steps, pages, strict=True):
            if not pos:
                continue
            rows = features(st["goal"], page, st.get("history", ()), self.priors)
            for e, row in zip(page, rows, strict=True):
                xs.append(row)
                ys.append(1.0 if e.ref in pos else 0.0)
        if not xs:
            raise ValueError("no expert step names a unit of its page; nothing to fit")
        x, y = np.asarray(xs), np.asarray(ys)
        wpos = (len(y) - y.sum()) / max(y.sum(), 1.0)  # balance the classes
        sw = np.where(y > 0, wpos, 1.0)
        w = np.asarray(self.weights, dtype=float)
        for _ in range(epochs):
            p = 1 / (1 + np.exp(-(x @ w)))
            g = x.T @ ((p - y) * sw) / sw.sum() + l2 * w
            w -= lr * g
        self.weights = [float(v) for v in w]
        return self

    def save(self, path: str | Path) -> None:
        d = {"features": list(FEATURES), "weights": self.weights, "priors": self.priors}
        Path(path).write_text(json.dumps(d, indent=1))

    @classmethod
    def load(cls, path: str | Path) -> WebRanker:
        d = json.loads(Path(path).read_text())
        if list(d["features"]) != list(FEATURES):
            raise ValueError(
                f"{path}: ranker features {d['features']} differ from this version's {list(FEATURES)}"
            )
        return cls(d["weights"], d.get("priors"))


def answer_text(action: str) -> str | None:
    """The message of ``send_msg_to_user('...')``, else None."""
    m = re.match(r"^\s*send_msg_to_user\((?P<q>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\)\s*$", str(action))
    if not m:
        return None
    import ast

    return str(ast.literal_eval(m.group("q")))


def positives(step: dict[str, Any], page: Sequence[Element]) -> set[str]:
    """The units the expert's action of ``step`` needs: its target, or for an answer the units holding
    each part of the answer (``"3; Elena Silva, Ines Garcia"``: parts split on ``;`` and ``,``)."""
    ref = action_ref(step["action"])
    if ref is not None:
        return {ref} if any(e.ref == ref for e in page) else set()
    ans = answer_text(step["action"])
    if ans is None or ans.strip().lower() == "done":
        return set()
    parts = [p.strip() for p in re.split(r"[;,]", ans) if p.strip() and not p.strip().isdigit()]
    if not parts:
        return set()
    out = set()
    for p in parts:
        for e in page:
            if p in e.text():
                out.add(e.ref)
                break
    return out


def recall_at_k(
    ranker: WebRanker, steps: Iterable[dict[str, Any]], ks: Sequence[int] = (5, 10, 15, 20)
) -> dict[str, Any]:
    """Share of expert steps whose needed units (:func:`positives`) are all in the ranker's top ``k``."""
    hits: Counter[int] = Counter()
    n = 0
    for st in steps:
        page = parse_page(st["axtree"])
        pos = positives(st, page)
        if not pos:
            continue
        n += 1
        ranked = [e.ref for e in ranker.rank(st["goal"], page, st.get("history", ()))]
        for k in ks:
            if pos <= set(ranked[:k]):
                hits[k] += 1
    return {"steps": n, **{f"recall@{k}": (hits[k] / n if n else 0.0) for k in ks}}
