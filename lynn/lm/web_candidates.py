"""LiveWeb actions valid by construction (MindAct step two): the compact prompt and the candidate actions.

:func:`render_ranked` is the observation a small model reads: goal, URL path, title, the last few
actions (with the last error), and the ranker's top-``k`` units of the page (:mod:`lynn.lm.web_ranker`),
one short line each, in page order, without element ids. :func:`candidates` enumerates every action the
model may take on that page, each as a short *reply* (what the model is trained to say and is scored on)
and the env action string it stands for:

- ``click link "Halcyon Smart Notebook"`` -> ``click('f1e44')`` for every clickable top-``k`` unit;
- ``fill textbox "Search products" = "Halcyon Smart Notebook"`` for every text field and every literal of the
  goal (quoted spans, capitalised runs, words with digits, e-mails) and the constants seen in train fills;
- ``select combobox "Sort by" = "price_desc"`` for every option; ``check``/``uncheck`` for checkboxes;
- ``answer "$11.64"`` for every text span of the top units (names, values, ``Label: value`` readings,
  numbers, dates) and ``answer "done"``; ``goto /user/farid46`` for the URL templates of train gotos
  filled with the goal's identifiers; ``go_back``.

The policy (:class:`lynn.agents.llm.LMPolicy` with a model trained on this format) scores every
candidate's reply by the LM's log-likelihood in one batched forward over the shared prompt's KV cache and
takes the best, so every action it sends parses and names an element on the page. Enumeration rather
than grammar-constrained decoding: the candidate set is small (tens per step), a 4M model ranks whole
replies better than it spells element ids, and no extra dependency is needed (a grammar library —
llguidance, xgrammar, outlines — would constrain the same set token by token).

Element ids are left out of the prompt and the reply: a reply names the element by role and name, and
:func:`candidates` maps it to the first element of the page with that role and name (the expert's rule).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from lynn.lm.web_ranker import Element, WebRanker, action_ref, answer_text, count_readings, parse_page

CLICKABLE = ("link", "button", "tab", "radio", "menuitem", "option")
FIELDS = ("textbox", "searchbox", "spinbutton")
WEB_RANKED_SYSTEM = "You are a web agent. Reply with one action on the elements shown."
HISTORY = 4
#: The page-less prompt ``norm="pmi"`` calibrates against.
NULL_PROMPT = [
    {"role": "system", "content": WEB_RANKED_SYSTEM},
    {"role": "user", "content": "Goal: \nPage:  · \nDone: none\nElements:\n"},
]


@dataclass
class WebFormat:
    """What a model trained on the ranked format needs at act time (saved as ``lynn_web.json``).

    Attributes:
        k: top units shown.
        fill_constants: fill values of train steps that are not in the goal (``Written by Lynn.``).
        goto_templates: URL path templates of train gotos (``/user/{}``).
        line_chars: max characters of a unit's line.
        ranker: the ranker's weights and priors (:meth:`WebRanker.save` format).
        norm: candidate score: ``sum`` (log-likelihood), ``mean`` (per token) or ``pmi`` (log-likelihood minus
            the reply's log-likelihood after an empty page, :data:`NULL_PROMPT`: how much this page and goal
            support the reply, which removes the bias towards short, frequent replies).
        slots: the goal's literals are shown as slot names (``L1``, ``L2``) wherever they occur — goal, page,
            history and replies — with one ``Slots:`` line giving their values (:func:`web_slots`): a fill
            or a click on the goal's product becomes ``= "L2"`` / ``link "L2"``, a choice among short names
            the prompt gives instead of a copy.
        show_options: a combobox's line lists its options (``[relevance|price_asc|…]``), so a select is
            read off the prompt, not only off the candidates.
        memory_weight: λ of the kNN-LM mixture with the model folder's action memory
            (:mod:`lynn.lm.web_memory`; 0: the LM alone).
    """

    k: int = 20
    fill_constants: list[str] = field(default_factory=list)
    goto_templates: list[str] = field(default_factory=list)
    line_chars: int = 90
    ranker: dict[str, Any] = field(default_factory=dict)
    norm: str = "sum"
    slots: bool = False
    show_options: bool = False
    memory_weight: float = 0.0

    def make_ranker(self) -> WebRanker:
        if not self.ranker:
            return WebRanker()
        return WebRanker(self.ranker["weights"], self.ranker.get("priors"))


def q(text: str) -> str:
    return '"' + str(text).replace('"', "'") + '"'


def describe(e: Element) -> str:
    return f"{e.role} {q(e.name)}" if e.name else e.role


def goal_literals(goal: str) -> list[str]:
    """Values a form may need, read off the goal: quoted spans, capitalised runs, words with digits, e-mails."""
    out: list[str] = []
    for m in re.finditer(r"[“\"]([^”\"]+)[”\"]", goal):
        out.append(m.group(1))
    for m in re.finditer(r"\b[A-Z][\w'&.-]*(?:\s+(?:&\s+)?[A-Z0-9][\w'&.-]*)*", goal):
        out.append(m.group(0).rstrip(".,?"))
    # Words with digits keep their hyphenated head: the SKU "SP-1095", not "1095".
    for m in re.finditer(r"[\w.+-]+@[\w.-]+\.\w+|#?\$?\b[\w-]*\d[\w.,:/-]*", goal):
        out.append(m.group(0).rstrip(".,?").lstrip("#"))
    # A run after "to"/"as" up to the end of a clause ("Change my address to 5 Rue Verte, Denver.").
    for m in re.finditer(r"\b(?:to|as|titled|named|called)\s+([^.?!“”]+?)[.?!]?$", goal):
        out.append(m.group(1).strip())
    out += [p.strip() for s in list(out) if ", " in s for p in s.split(",")]
    out += [s.lstrip("$") for s in list(out) if s.startswith("$")]
    seen, uniq = set(), []
    for s in out:
        s = s.strip()
        if s and s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq


#: The longest combobox option list shown on a unit's line (characters).
OPTIONS_CHARS = 120


def web_slots(goal: str, min_chars: int = 2) -> dict[str, str]:
    """Slot name -> literal for the goal's literals (:func:`goal_literals`), named in the order they occur in
    the goal (the longer first where two start together), numbers ``N1, N2, …`` apart from the rest ``L1, L2,
    …``, so a template's product is the same slot in every instance. Left out: the goal's first word (``What``, ``Show``, the ``Add`` of ``Add 2``: the
    template's verb, not a value), one-character literals (``1`` is one token to copy, and masking it would
    rename every ``1`` on the page), and the pieces of a quoted literal (``Solid`` of “Solid choice”)."""
    lits: list[tuple[int, int, str]] = []  # (position in the goal, -length, literal)
    first = goal.split(" ", 1)[0].rstrip(",.?")
    quoted = [m.group(1) for m in re.finditer(r"[“\"]([^”\"]+)[”\"]", goal)]
    forums = re.findall(r"\bf/[\w-]+", goal)  # "f/travel": a forum, named like a path
    for lit in [*goal_literals(goal), *forums]:
        if goal.startswith(lit) and lit.startswith(first):  # "Add 2" of "Add 2 of the …": the verb goes
            lit = lit[len(first) :].strip()
        if len(lit) < min_chars or any(lit == x[2] for x in lits):
            continue
        if lit not in quoted and any(lit in qt for qt in quoted):  # "Solid" of “Solid choice”
            continue
        # Where the literal stands whole (the "10" of "10 units", not the one inside "HO-1046").
        whole = re.search(rf"(?<![\w.$,-]){re.escape(lit)}(?![\w]|[.,/-]\w)", goal)
        at = whole.start() if whole else goal.find(lit)
        lits.append((at if at >= 0 else len(goal), -len(lit), lit))
    out: dict[str, str] = {}
    counts = {"L": 0, "N": 0}
    for _, _, lit in sorted(lits):
        # Numbers apart from names: "Add 12 of the X" and "Add 2 of the X" (2 is no slot) both name X "L1".
        kind = "N" if re.fullmatch(r"\$?\d[\d.,]*", lit) else "L"
        counts[kind] += 1
        out[f"{kind}{counts[kind]}"] = lit
    return out


def _slot_pattern(slots: dict[str, str]) -> re.Pattern[str] | None:
    if not slots:
        return None
    alts = "|".join(re.escape(v) for v in sorted(slots.values(), key=len, reverse=True))
    # Whole literals only: "69" is not masked inside "$69.00", "#169" or "2025-03-69" (but is in "/orders/69").
    return re.compile(rf"(?<![\w.$,-])(?:{alts})(?![\w]|[.,/-]\w)")


def mask_slots(text: str, slots: dict[str, str]) -> str:
    """``text`` with every whole occurrence of a slot's literal written as the slot's name (longest first)."""
    pat = _slot_pattern(slots)
    if pat is None:
        return text
    by_lit = {v: k for k, v in slots.items()}
    return pat.sub(lambda m: by_lit[m.group(0)], text)


def shown_replies(replies: Sequence[str], goal: str, fmt: WebFormat) -> list[str]:
    """Replies as the model reads and scores them: masked when ``fmt.slots`` (the env action is unchanged)."""
    if not fmt.slots:
        return list(replies)
    slots = web_slots(goal)
    return [mask_slots(r, slots) for r in replies]


def unit_line(e: Element, fmt: WebFormat) -> str:
    """``e``'s prompt line; with ``fmt.show_options`` a combobox also lists its options."""
    line = e.line(fmt.line_chars)
    if fmt.show_options and e.options:
        opts = "|".join(e.options)
        line += " [" + (opts if len(opts) <= OPTIONS_CHARS else opts[: OPTIONS_CHARS - 1] + "…") + "]"
    return line


def span_derivations(text: str) -> list[tuple[str, str]]:
    """The answer spans one text of a unit yields, each with how it was derived: ``all`` (the text),
    ``after`` (the value of a ``Label: value`` reading), ``m0``, ``m1``… (its money amounts, dates and numbers),
    ``by`` (the name after ``by``), ``head`` (the text before a closing parenthesis: ``Cobalt Pro Blender`` of
    ``Cobalt Pro Blender (12 units)``)."""
    t = text.strip()
    if not t:
        return []
    out = [("all", t)]
    m = re.match(r"^[A-Za-z][\w ]*:\s*(.+)$", t)
    if m:
        out.append(("after", m.group(1).strip()))
    for j, m2 in enumerate(re.finditer(r"\$[\d,]+(?:\.\d+)?|\d{4}-\d\d-\d\d|\b\d+(?:\.\d+)?\b", t)):
        out.append((f"m{j}", m2.group(0)))
    by = re.search(r"\bby (.+)$", t)
    if by:
        out.append(("by", by.group(1).strip()))
    head = re.match(r"^(.+?)\s+\([^()]*\)$", t)
    if head:
        out.append(("head", head.group(1).strip()))
    return out


def answer_spans(units: Sequence[Element]) -> list[str]:
    """Answers readable from ``units``: names, values, ``Label: value`` parts, numbers, dates, money, names
    after ``by``, heads before a parenthesis (:func:`span_derivations`)."""
    out: list[str] = []
    for e in units:
        for t in (e.name, e.value, *e.texts):
            out += [sp for _, sp in span_derivations(t)]
    seen, uniq = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            uniq.append(s)
    return uniq


MONTHS = ("January February March April May June July August September October November December").split()


def goal_dates(goal: str) -> dict[str, str]:
    """Dates a form may need that the goal implies but does not write: the first and last day of each month
    it names (``January 2025`` or ``2025-01``), as ``{"@m0_first": "2025-01-01", "@m0_last": "2025-01-31"}``
    in the order the months occur (a date filter's From and To)."""
    import calendar

    found: list[tuple[int, int, int]] = []  # (position, year, month)
    for m in re.finditer(r"\b(" + "|".join(MONTHS) + r")\s+(\d{4})\b", goal):
        found.append((m.start(), int(m.group(2)), MONTHS.index(m.group(1)) + 1))
    for m in re.finditer(r"(?<![\d-])(\d{4})-(\d\d)(?![\d-])", goal):
        if 1 <= int(m.group(2)) <= 12:
            found.append((m.start(), int(m.group(1)), int(m.group(2))))
    out: dict[str, str] = {}
    for i, (_, y, mo) in enumerate(sorted(found)):
        last = calendar.monthrange(y, mo)[1]
        out[f"@m{i}_first"] = f"{y:04d}-{mo:02d}-01"
        out[f"@m{i}_last"] = f"{y:04d}-{mo:02d}-{last:02d}"
    return out


def history_line(replies: Sequence[str], error: str = "") -> str:
    shown = list(replies)[-HISTORY:]
    text = "; ".join(shown) if shown else "none"
    return f"Done: {text}\n" + (f"Error: {error[:120]}\n" if error else "")


def top_units(
    obs: dict[str, Any], replies: Sequence[str], fmt: WebFormat, ranker: WebRanker | None = None
) -> list[Element]:
    page = parse_page(str(obs.get("axtree", "")))
    ranker = ranker or fmt.make_ranker()
    return ranker.top(str(obs.get("goal", "")), page, _history_refs(replies, page), fmt.k)


def _history_refs(replies: Sequence[str], page: Sequence[Element]) -> list[str]:
    """The ranker's history: the replies mapped back to ``click('ref')``-like strings on this page."""
    out = []
    for r in replies:
        m = re.match(r'^\w+ (\w+) "(.*?)"', r)
        ref = next((e.ref for e in page if m and e.role == m.group(1) and e.name == m.group(2)), None)
        out.append(f"click('{ref}')" if ref else r)
    return out


def render_ranked(
    obs: dict[str, Any], replies: Sequence[str], fmt: WebFormat, units: Sequence[Element] | None = None
) -> list[dict[str, str]]:
    """The compact chat for ``obs`` after the replies ``replies`` (system + user)."""
    units = units if units is not None else top_units(obs, replies, fmt)
    url = urlparse(str(obs.get("url", "")))
    path = url.path + (f"?{url.query}" if url.query else "")
    goal = str(obs.get("goal", ""))
    user = (
        f"Goal: {goal}\n"
        f"Page: {path} · {obs.get('title', '')}\n"
        + history_line(replies, str(obs.get("last_action_error") or ""))
        + "Elements:\n"
        + "\n".join(unit_line(e, fmt) for e in units)
    )
    if fmt.slots:
        slots = web_slots(goal)
        table = "; ".join(f"{k} {q(v)}" for k, v in slots.items()) or "none"
        head, rest = mask_slots(user, slots).split("\n", 1)
        user = f"{head}\nSlots: {table}\n{rest}"
    return [{"role": "system", "content": WEB_RANKED_SYSTEM}, {"role": "user", "content": user}]


def _first(page: Sequence[Element], e: Element) -> str:
    """The first element of the page with ``e``'s role and name (the expert's choice among duplicates)."""
    return next((x.ref for x in page if x.role == e.role and x.name == e.name), e.ref)


def candidates(
    obs: dict[str, Any], units: Sequence[Element], fmt: WebFormat, page: Sequence[Element] | None = None
) -> list[tuple[str, str]]:
    """Every (reply, env action) the model may choose on this page; replies are unique."""
    page = page if page is not None else parse_page(str(obs.get("axtree", "")))
    goal = str(obs.get("goal", ""))
    out: dict[str, str] = {}

    def add(reply: str, action: str) -> None:
        out.setdefault(reply, action)

    values = [*goal_literals(goal), *fmt.fill_constants, *goal_dates(goal).values()]
    for e in units:
        ref = _first(page, e)
        d = describe(e)
        if e.role in CLICKABLE or (e.role == "checkbox"):
            if e.role == "checkbox":
                add(f"check {d}", f"check('{ref}')")
                add(f"uncheck {d}", f"uncheck('{ref}')")
            else:
                add(f"click {d}", f"click('{ref}')")
        if e.role in FIELDS:
            for v in values:
                add(f"fill {d} = {q(v)}", f"fill('{ref}', {v!r})")
            add(f"press {d} Enter", f"press('{ref}', 'Enter')")
        if e.role == "combobox":
            for o in e.options:
                add(f"select {d} = {q(o)}", f"select_option('{ref}', {o!r})")
    # Counts are read off the whole page's structure (rows of a table, items of a list), not off a unit's text.
    for s in ["done", *answer_spans(units), *count_readings(page)]:
        add(f"answer {q(s)}", f"send_msg_to_user({s!r})")
    url = urlparse(str(obs.get("url", "")))
    origin = f"{url.scheme}://{url.netloc}" if url.netloc else ""
    idents = [w.lstrip("#") for w in re.findall(r"#?\b\w*\d\w*\b", goal)]
    for t in fmt.goto_templates:
        for w in idents:
            path = t.replace("{}", w)
            add(f"goto {path}", f"goto({origin + path!r})")
    add("go_back", "go_back()")
    return list(out.items())


def reply_for(action: str, obs: dict[str, Any], page: Sequence[Element] | None = None) -> str | None:
    """The reply form of an env action on ``obs``'s page (for demonstrations), or None if it has none."""
    page = page if page is not None else parse_page(str(obs.get("axtree", "")))
    a = str(action).strip()
    ans = answer_text(a)
    if ans is not None:
        return f"answer {q(ans)}"
    if a == "go_back()":
        return "go_back"
    m = re.match(r"^goto\((['\"])(.*)\1\)$", a)
    if m:
        u = urlparse(m.group(2))
        return f"goto {u.path}" + (f"?{u.query}" if u.query else "")
    ref = action_ref(a)
    e = next((x for x in page if x.ref == ref), None)
    if e is None:
        return None
    d = describe(e)
    name = a.split("(", 1)[0]
    args = re.findall(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"", a)
    vals = [x or y for x, y in args][1:]
    if name == "click":
        return f"click {d}"
    if name in ("check", "uncheck"):
        return f"{name} {d}"
    if name == "fill" and vals:
        return f"fill {d} = {q(vals[0])}"
    if name == "select_option" and vals:
        return f"select {d} = {q(vals[0])}"
    if name == "press" and vals:
        return f"press {d} {vals[0]}"
    return None


def learn_format(steps: Sequence[dict[str, Any]], k: int = 20, fit_ranker: bool = True) -> WebFormat:
    """A :class:`WebFormat` from train-split expert steps: fill constants, goto templates, the fitted ranker."""
    consts: dict[str, int] = {}
    gotos: list[str] = []
    for st in steps:
        a = str(st["action"])
        m = re.match(r"^fill\(['\"]\w+['\"],\s*(['\"])(.*)\1\)$", a)
        if m and m.group(2) not in st["goal"]:
            consts[m.group(2)] = consts.get(m.group(2), 0) + 1
        g = re.match(r"^goto\((['\"])(.*)\1\)$", a)
        if g:
            path = urlparse(g.group(2)).path
            idents = [w.lstrip("#") for w in re.findall(r"#?\b\w*\d\w*\b", st["goal"])]
            for w in idents:
                if path.endswith("/" + w):
                    t = path[: -len(w)] + "{}"
                    if t not in gotos:
                        gotos.append(t)
    ranker = WebRanker().fit(steps) if fit_ranker else WebRanker()
    return WebFormat(
        k=k,
        fill_constants=[c for c, n in consts.items() if n >= 2],
        goto_templates=gotos,
        ranker={"weights": ranker.weights, "priors": ranker.priors},
    )


def episode_steps(transitions: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``lynn collect`` LiveWeb transitions (or :mod:`lynn.lm.web_dagger` records) -> ranker/demo steps, each
    with the earlier executed actions (``history``) and their reply forms (``replies``, each read on its own
    page). Records must come in episode order."""
    out: list[dict[str, Any]] = []
    hist: dict[tuple, tuple[list[str], list[str]]] = {}
    for r in transitions:
        key = (r["task_id"], r["seed"], r.get("episode"))
        acts, reps = ([], []) if r["step"] == 0 else hist.get(key, ([], []))
        obs = dict(r["obs"])
        obs["goal"] = r["goal"]
        reply = reply_for(r["action"], obs)
        out.append(
            {
                "goal": r["goal"],
                "obs": obs,
                "axtree": obs.get("axtree", ""),
                "history": list(acts),
                "replies": list(reps),
                "action": r["action"],
                "reply": reply,
                "task_id": r["task_id"],
                "seed": r["seed"],
                "split": r["split"],
                "step": r["step"],
                "success": r.get("success"),
                "reward": r.get("reward"),
            }
        )
        done = r.get("executed", r["action"])  # DAgger records: the learner's action, labelled by the expert
        done_reply = reply if done == r["action"] else reply_for(done, obs)
        hist[key] = (acts + [done], reps + [done_reply or str(done)])
    return out


def load_steps(paths: Sequence[str]) -> list[dict[str, Any]]:
    """:func:`episode_steps` of ``lynn collect`` transitions files, or of every ``transitions*.jsonl`` under folders."""
    import json

    rows: list[dict[str, Any]] = []
    for t in paths:
        p = Path(t)
        for f in sorted(p.rglob("transitions*.jsonl")) if p.is_dir() else [p]:
            rows += [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    return episode_steps(rows)


@dataclass
class AnswerPlan:
    """The decisions :meth:`RankedChooser._extend` takes to build an answer reply, as replies: ``first`` (its
    first part, picked among the page's candidates), ``steps`` (per extension, the reply to reach and the
    ones weighed there: stopping a part early, other extensions) and ``stops`` (the complete answer's own
    extensions, one part too many: stopping is right)."""

    first: str
    steps: list[tuple[str, list[str]]]
    stops: list[str]


def answer_plan(reply: str, spans: Sequence[str]) -> AnswerPlan | None:
    """The :class:`AnswerPlan` of ``reply`` (``answer "3; Elena Silva, Grace Costa"``) on a page with the answer
    spans ``spans``; None for a reply that is no answer, ``answer "done"``, or holds a part that is no span
    (the chooser cannot build it)."""
    if not (reply.startswith('answer "') and reply.endswith('"')) or reply == 'answer "done"':
        return None
    text = reply[len('answer "') : -1]
    pieces = re.split(r"(; |, )", text)
    parts, seps = pieces[0::2], pieces[1::2]
    shown = {q(sp)[1:-1]: q(sp)[1:-1] for sp in spans}
    if any(p not in shown for p in parts):
        return None
    names = list(shown)

    def exts(prefix: str) -> list[str]:
        return [f"answer {q(prefix + sep + sp)}" for sep in ("; ", ", ") for sp in names]

    steps, prefix = [], parts[0]
    for k in range(1, len(parts)):
        target = prefix + seps[k - 1] + parts[k]
        others = [f"answer {q(prefix)}", *[e for e in exts(prefix) if e != f"answer {q(target)}"]]
        steps.append((f"answer {q(target)}", others))
        prefix = target
    return AnswerPlan(f"answer {q(parts[0])}", steps, exts(text))


def ranked_demos(
    steps: Sequence[dict[str, Any]],
    fmt: WebFormat,
    source: str = "expert",
    negatives: int = 0,
    miner: tuple[Any, Any] | None = None,
    max_extensions: int = 24,
) -> list[Any]:
    """Chat demonstrations in the ranked format (one per step whose reply the candidate set holds).

    ``negatives > 0`` stores that many of the step's other candidate replies in ``extra["negatives"]`` (for
    ``lynn train lm --choice-loss``): the ones ``miner`` (a ``(model, tokenizer)`` pair) scores highest —
    the mistakes that model would make — or, without a miner, a seeded random draw. ``negatives < 0``
    stores them all: the whole decision the policy takes at that step.

    With ``negatives < 0``, an answer also gets the decisions :class:`RankedChooser` takes after it picks the best
    single candidate (:func:`answer_plan`): a multi-part answer (``"3; Elena Silva, Grace Costa"``) first
    picks its first part among the page's candidates, then extends one part at a time, then stops. The
    first pick and each extension are ``choice_only`` demonstrations (no next-token loss: a partial answer
    is no reply); the complete answer's demonstration weighs it against up to ``max_extensions`` of its own
    extensions (and, for a one-part answer, against the page's other candidates too).
    """
    import random

    from lynn.lm.data import Demo

    ranker = fmt.make_ranker()
    out = []
    for st in steps:
        if st["reply"] is None:
            continue
        page = parse_page(str(st["obs"].get("axtree", "")))
        units = top_units(st["obs"], st["replies"], fmt, ranker)
        msgs = render_ranked(st["obs"], st["replies"], fmt, units)
        rng = random.Random(f"{st['task_id']}/{st['seed']}/{st['step']}")

        def demo(
            reply: str, extra: dict[str, Any], msgs: list[dict[str, str]] = msgs, st: dict[str, Any] = st
        ) -> Any:
            if fmt.slots:  # the model reads and scores replies with the goal's literals as slot names
                reply = shown_replies([reply], st["goal"], fmt)[0]
                if "negatives" in extra:
                    extra = {**extra, "negatives": shown_replies(extra["negatives"], st["goal"], fmt)}
            return Demo(
                [*msgs, {"role": "assistant", "content": reply}],
                "Lynn/LiveWeb-v0",
                st["task_id"],
                int(st["seed"]),
                st["split"],
                st["step"],
                source,
                True,
                extra,
            )

        if negatives == 0:
            out.append(demo(st["reply"], {}))
            continue
        wrong = [r for r, _ in candidates(st["obs"], units, fmt, page) if r != st["reply"]]
        if negatives > 0:
            if miner is not None and wrong:
                sc = score_replies(
                    miner[0],
                    miner[1],
                    msgs,
                    shown_replies(wrong, st["goal"], fmt),
                    fmt.norm if fmt.norm != "pmi" else "sum",
                )
                wrong = [wrong[i] for i in sorted(range(len(wrong)), key=lambda i: -sc[i])]
            else:
                rng.shuffle(wrong)
            wrong = wrong[:negatives]
        plan = answer_plan(st["reply"], answer_spans(units)) if negatives < 0 else None
        if plan is not None:
            stops = list(plan.stops)
            rng.shuffle(stops)
            if plan.steps:  # multi-part: the full answer is no candidate; its first part is
                out.append(
                    demo(
                        plan.first, {"negatives": [w for w in wrong if w != plan.first], "choice_only": True}
                    )
                )
                for target, others in plan.steps:
                    others = list(others)
                    rng.shuffle(others)
                    out.append(demo(target, {"negatives": others[:max_extensions], "choice_only": True}))
                wrong = []
            wrong = [*wrong, *stops[:max_extensions]]
        out.append(demo(st["reply"], {"negatives": wrong}))
    return out


def score_replies(
    model: Any, tokenizer: Any, messages: list[dict[str, str]], replies: Sequence[str], norm: str = "sum"
) -> list[float]:
    """Log-likelihood of each reply (with its end-of-turn token) after ``messages``, in one batched forward.

    The prompt is run once; its KV cache is repeated over the candidates, which are right-padded, so the
    cost is the prompt plus the replies' tokens. ``norm``: ``sum`` (total log-prob) or ``mean`` (per token).
    """
    import torch

    from lynn.lm.tokenizer import encode_chat

    if norm not in ("sum", "mean"):
        raise ValueError(f"norm must be 'sum' or 'mean', got {norm!r}")
    prompt = encode_chat(tokenizer, messages, add_generation_prompt=True)
    conts = []
    for r in replies:
        full = encode_chat(
            tokenizer, [*messages, {"role": "assistant", "content": r}], add_generation_prompt=False
        )
        conts.append(full[len(prompt) :])
    ctx = int(getattr(model.config, "max_position_embeddings", 2048))
    longest = max(len(c) for c in conts)
    if len(prompt) + longest > ctx:
        prompt = prompt[-(ctx - longest) :]
    with torch.no_grad():
        p = torch.tensor([prompt])
        out = model(input_ids=p, use_cache=True)
        last = torch.log_softmax(out.logits[0, -1].float(), -1)
        cache = out.past_key_values
        n = len(conts)
        cache.batch_repeat_interleave(n)
        pad = tokenizer.pad_token_id or 0
        ids = torch.full((n, longest), pad, dtype=torch.long)
        mask = torch.zeros((n, longest), dtype=torch.long)
        for i, c in enumerate(conts):
            ids[i, : len(c)] = torch.tensor(c)
            mask[i, : len(c)] = 1
        attn = torch.cat([torch.ones((n, len(prompt)), dtype=torch.long), mask], 1)
        logits = model(input_ids=ids, past_key_values=cache, attention_mask=attn, use_cache=False).logits
        logp = torch.log_softmax(logits.float(), -1)
    scores = []
    for i, c in enumerate(conts):
        s = float(last[c[0]])
        for j in range(1, len(c)):
            s += float(logp[i, j - 1, c[j]])
        scores.append(s / len(c) if norm == "mean" else s)
    return scores


@dataclass
class Choice:
    """One decision of :class:`RankedChooser`: the reply (as the env's literals), the env action, the prompt
    (chat messages), the reply as the model reads and scores it (``shown``: slot names when
    ``WebFormat.slots``), the candidate taken (``index``) and the distribution it was drawn from (``probs``:
    the policy's over the page's candidates at the decision's temperature, 1 when greedy)."""

    reply: str
    action: str
    messages: list[dict[str, str]]
    shown: str
    index: int
    probs: list[float]
    #: the mixture behind the draw, when a memory was mixed in: ``p_knn``/``p_lm`` (the chosen candidate's share
    #: under each part, ``p_knn`` None when the memory held nothing for the page), ``weight`` (the policy's λ),
    #: ``behaviour`` (the probability the candidate was drawn with), ``key`` (the memory key matched).
    mixture: dict[str, Any] | None = None

    def token_ids(self, tokenizer: Any) -> tuple[list[int], list[int]]:
        """(prompt ids, reply ids with the end-of-turn token): the split :func:`score_replies` scores."""
        return reply_token_ids(tokenizer, self.messages, self.shown)


def reply_token_ids(
    tokenizer: Any, messages: list[dict[str, str]], reply: str
) -> tuple[list[int], list[int]]:
    """(prompt ids, ``reply``'s ids with its end-of-turn token) after ``messages``, as :func:`score_replies`
    splits them: what an RL learner recomputes the chooser's log-likelihood of a reply from."""
    from lynn.lm.tokenizer import encode_chat

    prompt = encode_chat(tokenizer, messages, add_generation_prompt=True)
    full = encode_chat(
        tokenizer, [*messages, {"role": "assistant", "content": reply}], add_generation_prompt=False
    )
    return prompt, full[len(prompt) :]


class RankedChooser:
    """Chooses a LiveWeb action among :func:`candidates` by the LM's likelihood (what ``LMPolicy`` runs for
    a model saved with ``lynn_web.json``).

    Multi-part answers (``"3; Elena Silva, Grace Costa"``) are built span by span: after the best single
    candidate is an answer, it is extended with ``"; "`` or ``", "`` and another span while that raises
    the reply's likelihood (at most ``max_parts`` parts); every part is a span of the page.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        fmt: WebFormat,
        max_parts: int = 8,
        memory: Any = None,
        weights: Any = None,
    ) -> None:
        self.model, self.tokenizer, self.fmt = model, tokenizer, fmt
        self.memory = memory  # a lynn.lm.web_memory.ActionMemory, mixed in with weight fmt.memory_weight
        #: a lynn.lm.web_memory.MemoryWeights: λ per state (memory key kind, goal template) instead of
        #: fmt.memory_weight; None: fmt.memory_weight everywhere (the default)
        self.weights = weights
        #: sampling only (temperature > 0): draw with λ·behaviour_scale instead of λ (exploration; the
        #: Choice records both probabilities so a learner can correct for it). 1: draw from the policy.
        self.behaviour_scale = 1.0
        #: sampling only: once the drawn candidate is an answer, redraw which answer among the answer
        #: candidates at this temperature (0: keep the draw). Explores the literal answered, which a verifier
        #: (the dream's checks) then scores; the Choice's probabilities stay the policy's own.
        self.answer_temperature = 0.0
        self.ranker = fmt.make_ranker()
        self.max_parts = max_parts
        self.last_prompt_tokens = 0
        self.goal = ""

    def choose(self, obs: dict[str, Any], replies: Sequence[str]) -> tuple[str, str]:
        """(reply, env action) for ``obs`` after ``replies``: the most likely candidate."""
        c = self.decide(obs, replies)
        return c.reply, c.action

    def decide(
        self, obs: dict[str, Any], replies: Sequence[str], temperature: float = 0.0, rng: Any = None
    ) -> Choice:
        """The decision for ``obs`` after ``replies``, with the token ids an RL learner trains on.

        ``temperature > 0`` samples the candidate from the policy's distribution (the LM's softmax, mixed
        with the action memory when there is one) sharpened or flattened by ``temperature``, from ``rng``
        (a ``random.Random``); ``0`` takes the most likely one. An answer is then completed as greedy
        decoding does (memory pattern, else part-by-part extension), so the sampled decision is the
        candidate, and the completion ids are the whole reply as the model scores it.
        """
        page = parse_page(str(obs.get("axtree", "")))
        units = self.ranker.top(str(obs.get("goal", "")), page, _history_refs(replies, page), self.fmt.k)
        msgs = render_ranked(obs, replies, self.fmt, units)
        cands = candidates(obs, units, self.fmt, page)
        from lynn.lm.tokenizer import encode_chat

        self.last_prompt_tokens = len(encode_chat(self.tokenizer, msgs, add_generation_prompt=True))
        self.goal = str(obs.get("goal", ""))
        mixed = self.memory is not None and (self.weights is not None or self.fmt.memory_weight > 0)
        parts: tuple[list[float], list[float] | None] | None = None
        key, lam, lam_b = "", self.fmt.memory_weight, self.fmt.memory_weight
        if mixed:
            from lynn.lm.web_memory import (
                answer_addresses,
                element_paths,
                memory_slots,
                mix,
                mix_parts,
                reply_forms,
            )

            key, counts = self.memory.lookup_key(self.goal, replies, str(obs.get("url", "")))
            where = answer_addresses(page, self.goal)
            paths = element_paths(page)
            slots = memory_slots(self.goal)  # the memory's own delexicalisation, whatever the LM reads

            def forms_of(r: str, a: str) -> list[str]:
                path = paths.get(action_ref(a) or "")
                return reply_forms(
                    r, mask_slots(r, slots), self.memory.constants, where, self.goal, path=path
                )

            forms = [forms_of(r, a) for r, a in cands]
            # What the memory recalls for this state may sit beyond the ranker's top k (the "top" sort link, the
            # 10th month of a report): those of the whole page's candidates join, the LM scoring them unseen.
            held = {f for fs in forms for f in fs}
            if any(counts.get(f, 0) > 0 for f in counts if f not in held):
                have = {r for r, _ in cands}
                for r, a in candidates(obs, page, self.fmt, page):
                    fs = forms_of(r, a) if r not in have else []
                    if any(counts.get(f, 0) > 0 and f not in held for f in fs):
                        cands.append((r, a))
                        forms.append(fs)
            scores = self._score(msgs, [r for r, _ in cands])
            if self.weights is not None:
                lam = self.weights.weight(self.goal, key)
            pick = draw = mix(scores, forms, counts, lam)
            if self.weights is not None:
                parts = mix_parts(scores, forms, counts)
            if temperature > 0 and self.behaviour_scale != 1.0:
                lam_b = min(1.0, max(0.0, lam * self.behaviour_scale))
                draw = mix(scores, forms, counts, lam_b)
            else:
                lam_b = lam
        else:
            scores = self._score(msgs, [r for r, _ in cands])
            pick = draw = scores
        import math

        tau = temperature if temperature > 0 else 1.0
        w = [math.exp((x - max(draw)) / tau) for x in draw]
        probs = [x / sum(w) for x in w]
        if temperature > 0 and len(cands) > 1:
            import random

            best = (rng or random.Random()).choices(range(len(cands)), weights=probs)[0]
            best = self._redraw_answer(best, cands, draw, rng or random.Random())
        else:
            best = max(range(len(cands)), key=lambda i: pick[i])
        mixture = None
        if parts is not None:
            p_lm, knn = parts
            mixture = {
                "p_lm": p_lm[best],
                "p_knn": None if knn is None else knn[best],
                "weight": lam,
                "behaviour_weight": lam_b,
                "behaviour": probs[best] if temperature > 0 and len(cands) > 1 else 1.0,
                "key": key,
                "goal": self.goal,
            }
        reply, action = cands[best]
        if reply.startswith("answer ") and reply != 'answer "done"':
            first = answer_text(action) or ""
            built = self._recall_answer(first, page) if mixed and lam > 0 else None
            if built is not None:
                reply, action = f"answer {q(built)}", f"send_msg_to_user({built!r})"
            else:
                reply, action = self._extend(msgs, units, first, scores[best])
        return Choice(
            reply, action, msgs, shown_replies([reply], self.goal, self.fmt)[0], best, probs, mixture
        )

    def _redraw_answer(
        self, best: int, cands: Sequence[tuple[str, str]], scores: Sequence[float], rng: Any
    ) -> int:
        """``best`` when :attr:`answer_temperature` is 0 or it is no answer; else an answer candidate drawn from
        the answers' own scores at that temperature."""
        import math

        def is_answer(reply: str) -> bool:
            return reply.startswith("answer ") and reply != 'answer "done"'

        if self.answer_temperature <= 0 or not is_answer(cands[best][0]):
            return best
        idx = [i for i, (r, _) in enumerate(cands) if is_answer(r)]
        top = max(scores[i] for i in idx)
        w = [math.exp((scores[i] - top) / self.answer_temperature) for i in idx]
        return idx[rng.choices(range(len(idx)), weights=w)[0]]

    def _recall_answer(self, first: str, page: Sequence[Element]) -> str | None:
        """The whole answer after its first part as the memory's answers of this template went on (None: no
        stored answer from any of this part's addresses, or the page lacks a part; the LM extends it then).
        Of the part's addresses (:func:`lynn.lm.web_memory.answer_addresses`) the one most answers went on
        from is taken."""
        from lynn.lm.web_memory import answer_addresses, best_pattern, extend_answer, path_addresses

        found = [
            self.memory.answers.get(self.memory.answer_key(self.goal, a))
            for a in answer_addresses(page, self.goal).get(first, [])
        ]
        found = [p for p in found if p]
        if not found:
            return None
        patterns = max(found, key=lambda p: sum(p.values()))
        return extend_answer(first, best_pattern(patterns), path_addresses(page))

    @classmethod
    def from_folder(cls, model: Any, tokenizer: Any, folder: str | Path, **kw: Any) -> RankedChooser:
        """The chooser of a model folder: its ``lynn_web.json`` and, if present, its action memory."""
        import json

        from lynn.lm.web_memory import MEMORY_FILE, MIXTURE_FILE, ActionMemory, MemoryWeights

        fmt = WebFormat(**json.loads((Path(folder) / "lynn_web.json").read_text()))
        mem_file = Path(folder) / MEMORY_FILE
        memory = ActionMemory.load(mem_file) if mem_file.exists() else None
        mix_file = Path(folder) / MIXTURE_FILE  # learned λ per state (DynaWeb), when the folder has them
        if memory is not None and mix_file.exists() and "weights" not in kw:
            kw["weights"] = MemoryWeights.load(mix_file)
        return cls(model, tokenizer, fmt, memory=memory, **kw)

    def _score(self, msgs: list[dict[str, str]], replies: list[str]) -> list[float]:
        replies = shown_replies(replies, self.goal, self.fmt)
        if self.fmt.norm != "pmi":
            return score_replies(self.model, self.tokenizer, msgs, replies, self.fmt.norm)
        got = score_replies(self.model, self.tokenizer, msgs, replies, "sum")
        null = score_replies(self.model, self.tokenizer, NULL_PROMPT, replies, "sum")
        return [g - n for g, n in zip(got, null, strict=True)]

    def _extend(
        self, msgs: list[dict[str, str]], units: Sequence[Element], text: str, score: float
    ) -> tuple[str, str]:
        spans = [s for s in answer_spans(units) if s]
        for _ in range(self.max_parts - 1):
            ext = [text + sep + s for sep in ("; ", ", ") for s in spans]
            sc = self._score(msgs, [f"answer {q(t)}" for t in ext])
            i = max(range(len(ext)), key=lambda j: sc[j])
            if sc[i] <= score:
                break
            text, score = ext[i], sc[i]
        return f"answer {q(text)}", f"send_msg_to_user({text!r})"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lynn.lm.web_candidates TRANSITIONS... --data OUT_DATA --model MODEL_DIR [--k 20]``:
    ranked-format demos from ``lynn collect`` LiveWeb transitions (train split only), and the format file
    (``lynn_web.json``: fitted ranker, fill constants, goto templates) written into the model folder."""
    import argparse
    import dataclasses
    import json
    from pathlib import Path

    from lynn.lm.data import write_demos

    ap = argparse.ArgumentParser(prog="python -m lynn.lm.web_candidates", description=main.__doc__)
    ap.add_argument("transitions", nargs="+", help="transitions.jsonl files or folders holding them")
    ap.add_argument("--data", required=True, help="folder for demos.jsonl")
    ap.add_argument("--model", required=True, help="model folder that receives lynn_web.json")
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument(
        "--negatives", type=int, default=0, help="wrong candidate replies kept per demo (--choice-loss)"
    )
    ap.add_argument("--mine", help="model folder whose highest-scored wrong candidates are the negatives")
    ap.add_argument("--format", help="reuse this lynn_web.json (ranker, constants) instead of fitting one")
    ap.add_argument("--slots", action="store_true", help="goal literals as slot names (WebFormat.slots)")
    ap.add_argument("--show-options", action="store_true", help="combobox options on their line")
    args = ap.parse_args(argv)
    steps = load_steps(args.transitions)
    bad = [s for s in steps if s["split"] != "train"]
    if bad:
        raise SystemExit(
            f"{bad[0]['task_id']} is a {bad[0]['split']} instance: training data holds train instances only"
        )
    if args.format:
        fmt = WebFormat(**json.loads(Path(args.format).read_text()))
        if args.k != ap.get_default("k"):
            fmt.k = args.k
    else:
        fmt = learn_format(steps, k=args.k)
    fmt.slots = fmt.slots or args.slots
    fmt.show_options = fmt.show_options or args.show_options
    miner = None
    if args.mine:
        from lynn.lm.backends import TransformersGenerator

        gen = TransformersGenerator(args.mine, threads=1)
        miner = (gen.model, gen.tokenizer)
    demos = ranked_demos(steps, fmt, negatives=args.negatives, miner=miner)
    Path(args.data).mkdir(parents=True, exist_ok=True)
    write_demos(Path(args.data) / "demos.jsonl", demos, append=False)
    Path(args.model).mkdir(parents=True, exist_ok=True)
    (Path(args.model) / "lynn_web.json").write_text(json.dumps(dataclasses.asdict(fmt), indent=1))
    print(f"{len(steps)} steps -> {len(demos)} demos in {args.data}; format -> {args.model}/lynn_web.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
