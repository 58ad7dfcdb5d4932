"""An action memory for the LiveWeb chooser: a kNN-LM over delexicalised expert replies.

The 3.7M ranked-format LM picks the expert's action on only ~65% of steps, its *own training steps* included
(``python -m lynn.lm.web_accuracy``): it underfits the procedures (which field next, which sort option, when a
task is done). Those procedures are what the train split holds most plainly: with the goal's literals as slot
names (:func:`lynn.lm.web_candidates.web_slots`), every instance of a template has the same goal text and the
same replies (``fill textbox "Max price" = "N2"`` then ``select combobox "Sort by" = "price_desc"``), so the
expert's next reply in a new instance is, most of the time, the one it gave at the same point of another.

:class:`ActionMemory` stores the train steps' masked replies under keys that say where an episode is — the
masked goal with the masked history, then coarser keys (the goal with the last reply and the page's path
pattern; the goal with the path pattern) for states the expert never visited — and gives, for a new state, the
distribution of the replies stored under its most specific key that has any. :class:`RankedChooser` mixes it
with the LM's distribution over the page's candidates, as the kNN-LM does (Khandelwal et al., 2020:
``p = λ p_kNN + (1 − λ) p_LM``), renormalised over the candidates the page offers (a stored answer such as
another instance's price is no candidate on this page, so answers stay the LM's to read). λ is
``WebFormat.memory_weight``, chosen on a salted draw of *train* instances (never the test split).

Why not a retrieved demonstration in the prompt instead (Synapse-style exemplars): that needs the LM to learn
to copy the hint, which is the skill it lacks; the mixture needs no retraining and keeps the LM for what only it
can do, reading the page.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from lynn.lm.web_candidates import goal_dates, mask_slots, span_derivations, web_slots
from lynn.lm.web_ranker import Element, action_ref, children_of, count_readings, parse_page, subtree

MEMORY_FILE = "lynn_memory.json.gz"


def memory_slots(goal: str) -> dict[str, str]:
    """The memory's delexicalisation: :func:`lynn.lm.web_candidates.web_slots` with one-character literals too
    (the ``9`` of "order #9", the ``1`` of "with 1 units"), so that their replies are stored as the other
    instances' are (``goto /orders/N1``). The LM's prompt keeps them as written (masking a ``1`` there would
    rename every ``1`` on the page); the memory only masks replies."""
    return web_slots(goal, min_chars=1)


def path_pattern(url: str, slots: dict[str, str]) -> str:
    """The page's path with the goal's literals masked and other digits as ``#`` (``/product/#``)."""
    p = mask_slots(urlparse(url).path, slots)
    return re.sub(r"\d+", "#", p)


def template_of(goal: str, slots: dict[str, str]) -> str:
    """The goal with its slots masked and any other digits as ``#``: the same for every instance of a template."""
    # Slot names too: "with 1 units" (1 is no slot) and "with N3 units" are one template.
    return re.sub(r"\b[LN]\d+\b|\d+", "#", mask_slots(goal, slots))


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_SLOT_NAME = re.compile(r"^[LN]\d+$")
_DERIVED = re.compile(r"^@(?:m\d+_(?:first|last)|w\d+|in:[LN]\d+)$")  # goal_dates, goal_word


def generalise(reply: str, constants: set[str] | frozenset[str]) -> str:
    """``reply`` (masked) with every quoted value that is neither a slot name nor a site constant as ``*``:
    ``click link "Fjord Pro Webcam"`` -> ``click link "*"``, ``answer "$85.38"`` -> ``answer "*"``; kept:
    ``click button "Save product"``, ``answer "done"``, ``fill textbox "Price" = "N2"``."""
    return _QUOTED.sub(
        lambda m: (
            m.group(0)
            if m.group(1) in constants or _SLOT_NAME.match(m.group(1)) or _DERIVED.match(m.group(1))
            else '"*"'
        ),
        reply,
    )


def _fields(e: Element) -> list[tuple[str, str]]:
    return [("name", e.name), ("value", e.value), *((f"t{i}", x) for i, x in enumerate(e.texts))]


def _base(e: Element, n: int, field_name: str, text: str) -> str:
    lab = re.match(r"^([A-Za-z][\w ]*):\s*(.+)$", text.strip())
    return lab.group(1) if lab else f"{e.role}#{n}.{field_name}"


def _span_places(page: Sequence[Element]) -> Iterable[tuple[str, str]]:
    """Each answer span of ``page`` (:func:`lynn.lm.web_candidates.span_derivations`) with where it sits, in
    words that hold across instances, in page order: ``Price/after`` (the value of a ``Price: …`` reading),
    ``Rating/m1`` (its second number), ``link#14.name/all`` (the 15th link's name: the first product of a sorted
    list), ``article#2.name/by`` (the third review's author)."""
    seen: Counter[str] = Counter()
    for e in page:
        n = seen[e.role]
        seen[e.role] += 1
        for field_name, t in _fields(e):
            base = _base(e, n, field_name, t)
            for how, sp in span_derivations(t):
                yield sp, f"{base}/{how}"


#: Item roles whose position in their list, or whose row neighbours, an answer can be addressed by.
ITEMS = ("row", "listitem", "article")


def goal_keys(goal: str) -> dict[str, str]:
    """The goal's values an answer can be located by, value -> name: its slots (:func:`web_slots`: ``L1``,
    ``N1``) and its other bare numbers by order (``#0``, ``#1``: the ``1`` of "number 1 on the list")."""
    slots = memory_slots(goal)
    out = {v: k for k, v in slots.items()}
    for j, m in enumerate(re.finditer(r"(?<![\w.$-])\d+(?![\w.-]\w)", goal)):
        out.setdefault(m.group(0), f"#{j}")
    return out


def answer_addresses(page: Sequence[Element], goal: str) -> dict[str, list[str]]:
    """Every address of every answer the chooser can form on ``page`` (the spans' and the counts'), for the
    memory to store and match an answer by. Besides each span's places on the page (:func:`_span_places`) an
    answer is addressed by what locates it in any instance:

    - ``count:table#0>row*`` — a count of the page's structure (:func:`lynn.lm.web_ranker.count_readings`);
    - ``rank:#0>listitem/0.value/head`` — in the item (row, list item, article) whose position in its list
      is a number of the goal (``number 3 on the list``), the span at that place of the item;
    - ``key:N1>row/3.name/all`` — in the item that shows one of the goal's values (the row of ``2025-10``),
      the span at that place of the item.
    """
    out: dict[str, list[str]] = {}

    def add(span: str, address: str) -> None:
        got = out.setdefault(span, [])
        if address not in got:
            got.append(address)

    for sp, where in _span_places(page):
        add(sp, where)
    for value, addresses in count_readings(page).items():
        for a in addresses:
            add(value, a)
    keys = goal_keys(goal)
    for kids in children_of(page).values():
        items = [c for c in kids if c.role in ITEMS]
        for pos, item in enumerate(items, 1):
            inside = subtree(item, page)
            spans = [
                (f"{k}.{field_name}/{how}", sp)
                for k, x in enumerate(inside)
                for field_name, t in _fields(x)
                for how, sp in span_derivations(t)
            ]
            if str(pos) in keys:
                for where, sp in spans:
                    add(sp, f"rank:{keys[str(pos)]}>{item.role}/{where}")
            shown = {sp for _, sp in spans}
            for value, name in keys.items():
                if value in shown:
                    for where, sp in spans:
                        if sp != value:
                            add(sp, f"key:{name}>{item.role}/{where}")
    return out


def reply_forms(
    raw: str,
    shown: str,
    constants: frozenset[str],
    addresses: dict[str, list[str]],
    goal: str,
    text_first: bool = False,
    path: str | None = None,
) -> list[str]:
    """What the memory stores and matches for a reply: an answer as the addresses of its (first) part on the page
    (``answer @Price/after``, :func:`answer_addresses`); anything else :func:`generalise`-d, with a date the goal
    implies as its name (``fill textbox "From date" = "@m0_first"``, :func:`goal_dates`) and an option or link
    the goal names without quoting as where the goal says it (``select combobox "Status" = "@w2"``,
    :func:`goal_word`); a click on an element named by no such word also by the element's place on the page
    (``click @main.0/table.0/rowgroup.1/row.0/cell.1/link.0``, ``path``: the first search result).

    ``text_first`` (what the memory stores): an answer the page writes somewhere is stored by where it is written,
    not as a count of rows that happens to equal it ("24 products" on a page that lists 20), and an unnamed click
    by its place only; a candidate is matched by all its forms."""
    if raw.startswith('answer "') and raw.endswith('"') and raw != 'answer "done"':
        first = re.split(r"; |, ", raw[len('answer "') : -1])[0]
        if first in addresses:
            found = addresses[first]
            written = [a for a in found if not a.startswith("count:")]
            return ["answer @" + a for a in (written if text_first and written else found)]
    for name, value in goal_dates(goal).items():
        shown = shown.replace(f'"{value}"', f'"{name}"')
    if shown.startswith(("select ", "click ")):

        def by_goal(m: re.Match[str]) -> str:
            v = m.group(1)
            if v in constants or _SLOT_NAME.match(v) or _DERIVED.match(v):
                return m.group(0)
            return f'"{goal_word(v, goal) or v}"'

        shown = _QUOTED.sub(by_goal, shown)
    form = generalise(shown, constants)
    if path and form.startswith("click ") and form.endswith('"*"'):
        # Stored by its place alone: a link "*" share would go to whichever link the LM likes (a banner link).
        return ["click @" + path] if text_first else [form, "click @" + path]
    return [form]


def element_paths(page: Sequence[Element]) -> dict[str, str]:
    """Each unit's place in the page's structure by its ref: the path of roles from the top, each with its rank
    among its siblings of that role (``main.0/table.0/rowgroup.1/row.2/cell.1``: the second cell of the third
    body row)."""
    rank: dict[int, str] = {}
    for children in children_of(page).values():
        seen: Counter[str] = Counter()
        for c in children:
            rank[c.index] = f"{c.role}.{seen[c.role]}"
            seen[c.role] += 1
    full: dict[int, str] = {}
    out: dict[str, str] = {}
    stack: list[Element] = []
    for e in page:
        while stack and stack[-1].depth >= e.depth:
            stack.pop()
        full[e.index] = (full[stack[-1].index] + "/" if stack else "") + rank[e.index]
        out[e.ref] = full[e.index]
        stack.append(e)
    return out


def path_addresses(page: Sequence[Element]) -> dict[str, list[str]]:
    """Where each answer span of ``page`` sits in the page's structure (:func:`element_paths`), outside the
    banner, with the field and the derivation (``main.0/table.0/rowgroup.1/row.2/cell.1:name/all``), every
    place of it in page order (``wei37`` is the post's author and the comment's). The parts of a multi-part
    answer are located by these paths (:func:`answer_pattern`)."""
    paths = element_paths(page)
    out: dict[str, list[str]] = {}
    for e in page:
        if e.in_banner or e.role == "banner":
            continue
        for field_name, t in _fields(e):
            for how, sp in span_derivations(t):
                got = out.setdefault(sp, [])
                where = f"{paths[e.ref]}:{field_name}/{how}"
                if where not in got:
                    got.append(where)
    return out


def _norm_words(text: str) -> list[str]:
    return [w[:-1] if len(w) > 3 and w.endswith("s") else w for w in re.findall(r"[a-z0-9]+", text.lower())]


def goal_word(value: str, goal: str) -> str | None:
    """Where the goal says ``value`` without quoting it (``processing`` of "Show the processing orders",
    ``4 stars`` of "a 4-star review", ``cycling`` of the slot ``f/cycling``), in words that hold across
    instances: ``@w2`` (from the 3rd word of the goal with its slots masked) or ``@in:L1`` (inside slot L1);
    None where it does not."""
    v = _norm_words(value)
    if not v:
        return None
    slots = memory_slots(goal)
    g = _norm_words(mask_slots(goal, slots))
    for i in range(len(g) - len(v) + 1):
        if g[i : i + len(v)] == v:
            return f"@w{i}"
    for name, lit in slots.items():
        w = _norm_words(lit)
        if any(w[i : i + len(v)] == v for i in range(len(w) - len(v) + 1)):
            return f"@in:{name}"
    return None


def _unify(a: str, b: str) -> str | None:
    """The path matching both ``a`` and ``b`` with one rank as ``*`` (two items of one list), or None."""
    (pa, fa), (pb, fb) = a.split(":", 1), b.split(":", 1)
    sa, sb = pa.split("/"), pb.split("/")
    if fa != fb or len(sa) != len(sb):
        return None
    diff = [i for i, (x, y) in enumerate(zip(sa, sb, strict=True)) if x != y]
    if len(diff) != 1:
        return None
    i = diff[0]
    ra, rb = sa[i].rsplit(".", 1), sb[i].rsplit(".", 1)
    if ra[0] != rb[0] or not (ra[1].isdigit() and rb[1].isdigit()):
        return None
    return "/".join([*sa[:i], ra[0] + ".*", *sa[i + 1 :]]) + ":" + fa


def _matches(pattern: str, address: str) -> bool:
    return re.fullmatch(re.escape(pattern).replace(r"\*", r"\d+"), address) is not None


def answer_pattern(text: str, paths: dict[str, list[str]]) -> str | None:
    """How a multi-part answer goes on after its first part, in page paths (:func:`path_addresses`) that hold
    across instances, one entry per run of parts of one list: ``"3; Ana Lee, Bo Wu, Cy Ode"`` ->
    ``"; main.0/article.*:name/by+, "`` (``*``, ``+`` and the separator: every span at that path of the page, in
    page order); ``"shipped; $31.64"`` -> ``"; main.0/paragraph.3:value/after"`` (a part found at several places
    lists them all, ``|``-separated, for :func:`best_pattern` to choose); ``""`` for a one-part answer; None when
    a part is nowhere on the page."""
    pieces = re.split(r"(; |, )", text)
    parts, seps = pieces[0::2], pieces[1::2]
    if any(p not in paths for p in parts[1:]):
        return None
    runs: list[list[Any]] = []  # [sep, places (one wildcard path once a run), separator inside the run or ""]
    for sep, part in zip(seps, parts[1:], strict=True):
        found = paths[part]
        if runs and runs[-1][2] in ("", sep):
            last = runs[-1]
            if "*" in last[1][0]:
                joined = last[1][0] if any(_matches(last[1][0], w) for w in found) else None
            else:
                joined = next((j for a in last[1] for b in found if (j := _unify(a, b))), None)
            if joined is not None:
                last[1], last[2] = [joined], sep
                continue
        runs.append([sep, list(found), ""])
    return "\t".join(sep + "|".join(where) + (f"+{inner}" if inner else "") for sep, where, inner in runs)


def best_pattern(patterns: Counter[str]) -> str:
    """The most common stored pattern, a one-span entry read as a run where another answer of the template
    listed spans at its path (an instance with one review teaches no list; one with three does), and a part
    found at several places read at the one such a run holds, else at its first."""
    lists: dict[str, str] = {}
    for pat in patterns:
        for e in pat.split("\t"):
            m = re.match(r"^(; |, )(.+?)\+(; |, )$", e)
            if m:
                lists[m.group(2)] = m.group(3)
    merged: Counter[str] = Counter()
    for pat, n in patterns.items():
        entries = []
        for e in filter(None, pat.split("\t")):
            sep, where = e[:2], e[2:]
            if "+" in where:
                entries.append(e)
                continue
            places = where.split("|")
            run = next((w for w in lists for p in places if _matches(w, p)), None)
            entries.append(f"{sep}{run}+{lists[run]}" if run else sep + places[0])
        merged["\t".join(entries)] += n
    return merged.most_common(1)[0][0]


def extend_answer(first: str, pattern: str, paths: dict[str, list[str]]) -> str | None:
    """The answer that :func:`answer_pattern` ``pattern`` makes of ``first`` on a page (its spans and their
    paths, :func:`path_addresses`, in page order), or None when the page lacks a part the pattern needs."""
    text, used = first, {first}
    for entry in filter(None, pattern.split("\t")):
        sep, want, inner = entry[:2], entry[2:], ""
        m = re.match(r"^(.+?)\+(; |, )$", want)
        if m:
            want, inner = m.group(1), m.group(2)
        want = want.split("|")[0]
        # Spans at the wanted path in page order: the matches differ only at the wildcard's rank.
        pat = re.compile(re.escape(want).replace(r"\*", r"(\d+)"))
        hits = []
        for sp, places in paths.items():
            for a in places:
                m2 = pat.fullmatch(a)
                if m2 and sp not in used:
                    hits.append((int(m2.group(1)) if m2.groups() else 0, sp))
        spans = list(dict.fromkeys(sp for _, sp in sorted(hits)))
        if not spans:
            return None
        take = spans if inner else spans[:1]
        text += sep + (inner or sep).join(take)
        used.update(take)
    return text


class ActionMemory:
    """Generalised expert replies under the keys of the states they were given in (see the module docstring).

    Attributes:
        table: key -> generalised reply -> count.
        constants: the quoted values kept in generalised replies: those in the replies of at least half of a
            template's train episodes (``Save product``, ``Sort by``, ``done``), not an instance's own names.
    """

    def __init__(
        self,
        table: dict[str, dict[str, int]] | None = None,
        constants: Iterable[str] = (),
        answers: dict[str, dict[str, int]] | None = None,
    ) -> None:
        self.table: dict[str, Counter[str]] = {k: Counter(v) for k, v in (table or {}).items()}
        self.constants = frozenset(constants)
        #: template + first part's address -> how the expert's answers went on (:func:`answer_pattern`).
        self.answers: dict[str, Counter[str]] = {k: Counter(v) for k, v in (answers or {}).items()}

    def answer_key(self, goal: str, first_address: str) -> str:
        return template_of(goal, memory_slots(goal)) + "\t" + first_address

    def keys(self, goal: str, replies: Sequence[str], url: str) -> list[str]:
        """The keys of a state, most specific first: template + history, template + last reply + page,
        template + page (history replies generalised)."""
        slots = memory_slots(goal)
        g = template_of(goal, slots)
        hist = [generalise(mask_slots(r, slots), self.constants) for r in replies]
        page = path_pattern(url, slots)
        last = hist[-1] if hist else ""
        return [
            "h\t" + g + "\t" + "\t".join(hist),
            "l\t" + g + "\t" + last + "\t" + page,
            "p\t" + g + "\t" + page,
        ]

    @classmethod
    def build(
        cls, steps: Iterable[dict[str, Any]], share: float = 0.5, min_episodes: int = 3
    ) -> ActionMemory:
        """From :func:`lynn.lm.web_candidates.episode_steps` steps (train split only; their ``reply`` set).

        A quoted value is a constant when it is in the replies of at least ``share`` of the episodes of a
        template with at least ``min_episodes`` episodes."""
        steps = [st for st in steps if st.get("reply") is not None]
        for st in steps:
            if st.get("split", "train") != "train":
                raise ValueError(
                    f"{st.get('task_id')} is a {st['split']} step: the memory holds train steps only"
                )
        episodes: dict[str, set[tuple[Any, Any]]] = {}
        uses: dict[tuple[str, str], set[tuple[Any, Any]]] = {}
        for st in steps:
            slots = memory_slots(st["goal"])
            t = template_of(st["goal"], slots)
            ep = (st["task_id"], st["seed"])
            episodes.setdefault(t, set()).add(ep)
            for m in _QUOTED.finditer(mask_slots(st["reply"], slots)):
                uses.setdefault((t, m.group(1)), set()).add(ep)
        constants = {
            v
            for (t, v), eps in uses.items()
            if len(episodes[t]) >= min_episodes and len(eps) >= share * len(episodes[t])
        }
        mem = cls(constants=constants)
        for st in steps:
            shown = mask_slots(st["reply"], memory_slots(st["goal"]))
            page = parse_page(str(st["axtree"]))
            where = answer_addresses(page, st["goal"])
            ref = action_ref(str(st.get("action", "")))
            path = element_paths(page).get(ref) if ref else None
            forms = reply_forms(st["reply"], shown, mem.constants, where, st["goal"], True, path)
            if forms[0].startswith("answer @"):
                pattern = answer_pattern(st["reply"][len('answer "') : -1], path_addresses(page))
                if pattern is not None:
                    for form in forms:
                        key = mem.answer_key(st["goal"], form[len("answer @") :])
                        mem.answers.setdefault(key, Counter())[pattern] += 1
            # A reply with several forms (an answer found at several addresses) shares one count among them:
            # the address that holds in every instance gathers it, the coincidences of one page do not.
            for key in mem.keys(st["goal"], st["replies"], str(st["obs"].get("url", ""))):
                counter = mem.table.setdefault(key, Counter())
                for form in forms:
                    counter[form] += 1 / len(forms)
        return mem

    def lookup(self, goal: str, replies: Sequence[str], url: str) -> Counter[str]:
        """Generalised reply counts under the most specific key of this state the memory holds (empty if none)."""
        return self.lookup_key(goal, replies, url)[1]

    def lookup_key(self, goal: str, replies: Sequence[str], url: str) -> tuple[str, Counter[str]]:
        """:meth:`lookup` with the key it found (``""`` and empty counts when none): its first field says how
        specific the match was (``h`` history, ``l`` last reply + page, ``p`` page)."""
        for key in self.keys(goal, replies, url):
            if key in self.table:
                return key, self.table[key]
        return "", Counter()

    def templates(self) -> list[str]:
        """The masked goal templates the memory holds keys of (:func:`template_of`)."""
        return sorted({k.split("\t")[1] for k in self.table})

    def save(self, path: str | Path) -> None:
        data = {
            "answers": {k: dict(v) for k, v in sorted(self.answers.items())},
            "constants": sorted(self.constants),
            "table": {k: dict(v) for k, v in sorted(self.table.items())},
        }
        with gzip.open(path, "wt", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True)

    @classmethod
    def load(cls, path: str | Path) -> ActionMemory:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
        return cls(data["table"], data["constants"], data.get("answers"))


def mix_parts(
    lm_scores: Sequence[float], forms: Sequence[str | Sequence[str]], counts: Counter[str]
) -> tuple[list[float], list[float] | None]:
    """The two distributions :func:`mix` mixes, per candidate: ``p_LM`` (the softmax of ``lm_scores``) and
    ``p_kNN`` (None when no stored reply has a candidate of its form on this page: the memory says nothing).
    A candidate's forms are a string or a list of them (:func:`reply_forms`): it gets a share of each."""
    import math

    top = max(lm_scores)
    ex = [math.exp(s - top) for s in lm_scores]
    z = sum(ex)
    p_lm = [e / z for e in ex]
    of = [[f] if isinstance(f, str) else list(f) for f in forms]
    present = {f for fs in of for f in fs if counts.get(f, 0) > 0}
    n = sum(counts[f] for f in present)
    if n == 0:
        return p_lm, None
    mass: dict[str, float] = {}
    members: Counter[str] = Counter()
    for fs, p in zip(of, p_lm, strict=True):
        for f in set(fs):
            mass[f] = mass.get(f, 0.0) + p
            members[f] += 1

    def share(
        f: str, p: float
    ) -> float:  # the candidate's part of form f's mass (even where p_LM underflows)
        return p / mass[f] if mass[f] > 0 else 1 / members[f]

    knn = [
        sum(counts[f] / n * share(f, p) for f in set(fs) if f in present)
        for fs, p in zip(of, p_lm, strict=True)
    ]
    return p_lm, knn


def mix(
    lm_scores: Sequence[float], forms: Sequence[str | Sequence[str]], counts: Counter[str], weight: float
) -> list[float]:
    """Log of ``weight · p_kNN + (1 − weight) · p_LM`` per candidate (``forms``: their :func:`reply_forms`).

    ``p_LM`` is the softmax of ``lm_scores``. The memory speaks of generalised replies (``click link "*"``);
    ``p_kNN`` gives each stored reply's share of the counts to the candidates of that form, split among them as
    the LM weighs them (so the memory says *what kind* of action, and the LM *which* of that kind)."""
    import math

    p_lm, knn = mix_parts(lm_scores, forms, counts)
    if weight <= 0 or knn is None:
        return [math.log(max(p, 1e-300)) for p in p_lm]
    return [math.log(max(weight * k + (1 - weight) * p, 1e-300)) for k, p in zip(knn, p_lm, strict=True)]


MIXTURE_FILE = "lynn_mixture.json"
#: The memory key kinds of :meth:`ActionMemory.keys`, most specific first.
KEY_LEVELS = ("h", "l", "p")


class MemoryWeights:
    """A memory weight λ per state instead of one ``WebFormat.memory_weight``: ``λ = σ(bias + level[k] +
    template[t])`` for a state whose memory match is of kind ``k`` (:data:`KEY_LEVELS`) in goal template ``t``
    (:func:`template_of`; a template without an entry adds 0). DynaWeb learns these logits by RL on the mixture
    (:mod:`lynn.agents.dynaweb.mixture`) and saves them as ``lynn_mixture.json`` beside the model; a chooser of a
    folder holding that file uses them (:meth:`lynn.lm.web_candidates.RankedChooser.from_folder`).
    """

    def __init__(
        self, bias: float, level: dict[str, float] | None = None, template: dict[str, float] | None = None
    ):
        self.bias = float(bias)
        self.level = {k: float(v) for k, v in (level or {}).items()}
        self.template = {k: float(v) for k, v in (template or {}).items()}

    def logit(self, goal: str, key: str) -> float:
        t = template_of(goal, memory_slots(goal))
        return self.bias + self.level.get(key.split("\t")[0], 0.0) + self.template.get(t, 0.0)

    def weight(self, goal: str, key: str) -> float:
        import math

        return 1.0 / (1.0 + math.exp(-self.logit(goal, key)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "bias": self.bias,
            "level": dict(sorted(self.level.items())),
            "template": dict(sorted(self.template.items())),
        }

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> MemoryWeights:
        d = json.loads(Path(path).read_text())
        return cls(d["bias"], d.get("level"), d.get("template"))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lynn.lm.web_memory TRANSITIONS... --model MODEL_DIR [--weight 0.5]``: the action memory of
    ``lynn collect`` expert transitions (train split only) into the model folder, and λ into its format."""
    import argparse

    from lynn.lm.web_candidates import load_steps

    ap = argparse.ArgumentParser(prog="python -m lynn.lm.web_memory", description=main.__doc__)
    ap.add_argument("transitions", nargs="+", help="transitions.jsonl files or folders (train split)")
    ap.add_argument("--model", required=True, help="model folder with lynn_web.json")
    ap.add_argument("--weight", type=float, help="set WebFormat.memory_weight (λ) in its lynn_web.json")
    args = ap.parse_args(argv)
    mem = ActionMemory.build(load_steps(args.transitions))
    mem.save(Path(args.model) / MEMORY_FILE)
    if args.weight is not None:
        fmt_file = Path(args.model) / "lynn_web.json"
        fmt = json.loads(fmt_file.read_text())
        fmt["memory_weight"] = args.weight
        fmt_file.write_text(json.dumps(fmt, indent=1))
    print(f"{len(mem.table)} keys -> {Path(args.model) / MEMORY_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
