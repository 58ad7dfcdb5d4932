"""The reward model of imagined episodes: P(task success | goal, trajectory, final page, answer).

A logistic regression over features a task's evaluator cares about (is the answer on the final page,
are the goal's values and names on it, did the trajectory submit a form, did the page confirm, ...),
each crossed with the task kind (``info`` / ``modify`` / ``nav``, from the LiveWeb task file), trained
with scikit-learn and saved as plain JSON weights (``reward.json``; no pickle). Besides the final page and
the answer, :func:`trajectory_features` read how the episode got there (values typed into fields, the
last step a navigation, a new flash message, the goal-named link followed or still pending) and
:func:`answer_context_features` where the answer stands (the page's content, not its menus; a table
column headed by a goal word). Features are chosen on a train-only split of whole train templates
(``benchmarks/reward_dev.py``), so that they hold on templates never seen.

**Training data** (:func:`reward_examples`), from ``lynn collect`` expert transitions:

- positives: each real episode's final state and answer (the LiveWeb evaluator's reward 1);
- hard negatives, *corrupted answers*: the final state with another instance's answer of the same
  template, or the answer's digits changed (``info`` tasks: the evaluator's string match fails);
- negatives, *truncated runs*: the episode stopped before its last state-changing action, with the
  expert's final message (``modify``/``nav``: the change or the navigation never happened), and
  ``info`` episodes stopped with no answer (a truncated episode scores 0).

- negatives, *real failures*: episodes that ended without reward 1 (``lynn collect --epsilon`` runs of the
  expert, truncated at the horizon or answering wrongly), scored live by the LiveWeb evaluator.

The corrupted and truncated negatives follow the evaluator's rules rather than being re-scored live; the
positives and the real failures are real outcomes.

``self_assess`` (:class:`SelfAssessReward`) is the other option: the policy LM answers "Did the agent
complete the goal? yes/no" about the final page (DynaWeb's self-assessment).
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from lynn.envs.worldmodel.baselines import action_value, element_block
from lynn.envs.worldmodel.data import episodes, template_of
from lynn.envs.worldmodel.delta import action_target

KINDS = ("info", "modify", "nav")
_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
_VALUE = re.compile(r"\$?\d+(?:[.,]\d+)*|“[^”]+”|\"[^\"]+\"|'[^']+'")
_SUBMIT = re.compile(
    r"\b(save|submit|update|post|add|place|buy|apply|vote|create|comment|remove|confirm|send)\b", re.I
)
_CONFIRM = re.compile(
    r"\b(saved|updated|posted|added|placed|success|thank|created|removed|confirmed|recorded)\b", re.I
)
_STOP = re.compile(r"""^\s*(send_msg_to_user|report_infeasible)\(\s*(['"])(.*)\2\s*\)\s*$""", re.S)
BASE_FEATURES = (
    "bias",
    "has_answer",
    "answer_in_page",
    "answer_token_frac",
    "goal_values_in_page",
    "goal_words_in_title",
    "goal_words_in_url",
    "submits",
    "infeasible",
    "answer_shape_seen",
    "answer_line_goal_words",
    "answer_in_goal",
    "answer_type_known",
    "answer_type_fits",
    "answer_value_on_page",
    "answer_on_control",
    "goal_values_in_title_url",
    "confirm_words_url",
    "goal_values_left_page",
    # Trajectory-aware (fourth pass): how the episode got to its final page.
    "goal_values_typed",
    "last_step_new_url",
    "status_line",
    "status_new",
    "goal_link_followed",
    "goal_link_pending",
    "answer_counts_items",
    "answer_in_content",
    "answer_column_goal_word",
    # Which fields the goal's values went into (a price typed into the Stock field is not the task).
    "goal_values_in_named_fields",
    "goal_values_in_other_fields",
)
#: Roles whose name is an input or a command, not content: an answer found only there is a UI string.
_CONTROLS = frozenset(
    "button textbox searchbox combobox checkbox radio spinbutton option tab menuitem slider switch".split()
)
_ROLE = re.compile(r"^\s*(?:\[[^\]]+\] )?([a-zA-Z]+)")
#: Share of training templates whose answer shapes are hidden when fitting (:func:`reward_examples`'s
#: ``unseen``): with every template's shapes known, the fit leans on ``answer_shape_seen`` alone and then
#: fails on templates it has never seen (chosen on a train-only dev split of whole templates: 0.5).
UNSEEN_SHARE = 0.5
#: Answer forms, most specific first: an answer has the first form that matches it whole.
ANSWER_TYPES = (
    ("email", re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]+")),
    ("date", re.compile(r"\d{4}-\d{2}-\d{2}")),
    ("money", re.compile(r"\$\d[\d,]*(?:\.\d+)?")),
    ("count", re.compile(r"\d+")),
    ("code", re.compile(r"[A-Z]{2,}-\d+")),
    ("handle", re.compile(r"[a-z][a-z0-9_.]*\d+")),
    ("word", re.compile(r"[a-z]+")),
    ("name", re.compile(r"[A-Z][^\s:]*(?: [^\s:]+)*")),
)
#: What a question asks for, read off its wording (the first rule that matches): the answer forms that fit.
#: Generic English question words, the same for every site and template.
GOAL_TYPES = (
    (re.compile(r"\be-?mail\b", re.I), frozenset({"email"})),
    (re.compile(r"\bdate\b|\bwhen\b", re.I), frozenset({"date"})),
    (re.compile(r"\bhow many\b|\bnumber of\b", re.I), frozenset({"count"})),
    (re.compile(r"\b(price|total|revenue|spend|spent|cost|amount|how much)\b", re.I), frozenset({"money"})),
    (re.compile(r"\b(sku|code)\b", re.I), frozenset({"code"})),
    (re.compile(r"\b(who|whom|author)\b", re.I), frozenset({"name", "handle"})),
    (re.compile(r"\b(which|title|name|category)\b", re.I), frozenset({"name", "word"})),
    (re.compile(r"\bstatus\b", re.I), frozenset({"word"})),
    (re.compile(r"\b(score|karma|stock|rating|rank|votes?)\b", re.I), frozenset({"count"})),
)


def answer_type(answer: str) -> str:
    """The form of an answer (:data:`ANSWER_TYPES`: ``email``, ``date``, ``money``, ``count``, ``code``,
    ``handle``, ``word``, ``name``), ``""`` for none of them."""
    a = answer.strip()
    return next((name for name, pat in ANSWER_TYPES if pat.fullmatch(a)), "")


def expected_types(goal: str) -> frozenset[str]:
    """The answer forms a question asks for (:data:`GOAL_TYPES`), empty when its wording says none."""
    return next((types for pat, types in GOAL_TYPES if pat.search(goal)), frozenset())


_PAGE_STRING = re.compile(r'"([^"\\]{1,40})"')


def answer_shape(answer: str) -> str:
    """``$11.64`` -> ``$9.9``, ``Pedro Fischer`` -> ``a``: the form of an answer, not its value. A run of
    words is one ``a`` (names differ in length), and a list part (``118, 4``) is the set of its items'
    forms: ``2; 118, 4`` and ``5; 151, 84, 32`` are both ``9; 9`` (lists differ in length)."""

    def one(item: str) -> str:
        return re.sub(r"a(?: a)+", "a", re.sub(r"[^\W\d_]+", "a", re.sub(r"\d+", "9", item.strip())))

    return "; ".join(
        ", ".join(sorted({one(x) for x in part.split(", ")})) for part in answer.strip().split("; ")
    )


def answer_items(answer: str) -> tuple[list[str], int | None]:
    """A multi-part answer's values (``"2; Blue Kettle, Red Mug"``: parts split at ``; ``, list items at
    ``, ``) and its leading number when it has one (``2``, a count of the list or a value of its own:
    ``5; 2023-04-03``); a one-part answer is its own only value."""
    ans = answer.strip()
    if "; " not in ans:
        return ([ans] if ans else []), None
    parts = [p.strip() for p in ans.split("; ") if p.strip()]
    count = int(parts[0]) if parts and parts[0].isdigit() and len(parts) > 1 else None
    rest = parts[1:] if count is not None else parts
    return [x.strip() for p in rest for x in p.split(", ") if x.strip()], count


def task_kinds() -> dict[str, str]:
    """Template -> kind, read from the bundled LiveWeb task file (no browser is started)."""
    from lynn.envs.liveweb.liveweb_env import LiveWebEnv

    return {template_of(t["task_id"]): str(t.get("kind") or "info") for t in LiveWebEnv.list_tasks()}


def answer_of(action: str) -> tuple[str | None, bool]:
    """(the text of a ``send_msg_to_user``/``report_infeasible`` action, whether it is infeasible)."""
    m = _STOP.match(action or "")
    if not m:
        return None, False
    return m.group(3), m.group(1) == "report_infeasible"


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


#: Actions that type or choose a value into a form field (their second argument is the value).
#: Page lines of a flash message: the ``status``/``alert`` role (``[e21] status: Vote recorded``).
_STATUS = re.compile(r"^\s*(?:\[[^\]]+\] )?(?:status|alert)\b:?\s*(.*)$")
#: Landmarks whose links are the site's chrome (the same on every page), not the page's content.
_CHROME = ("banner", "navigation", "contentinfo")
_LINE = re.compile(r"^(\s*)(?:\[[^\]]+\] )?([a-zA-Z]+)(?: \"((?:[^\"\\]|\\.)*)\")?")


def acted_steps(steps: Sequence[tuple[dict[str, Any], str]]) -> list[tuple[dict[str, Any], str]]:
    """The steps that act on the page: ``send_msg_to_user``/``report_infeasible`` left out (the env's
    history ends with the stop action on the final page; a truncated run has none)."""
    return [(o, a) for o, a in steps if not _STOP.match(a or "")]


def page_links(axtree: str) -> list[tuple[str, str, bool]]:
    """(link name, its ``/url:``, whether it is in the site's chrome: banner/navigation/footer) of a page."""
    out: list[tuple[str, str, bool]] = []
    stack: list[tuple[int, str]] = []  # (indent, role) of the open ancestors
    pending: tuple[int, str, bool] | None = None  # a link line waiting for its /url
    for line in axtree.split("\n"):
        s = line.lstrip()
        ind = len(line) - len(s)
        if s.startswith("/url: "):
            if pending is not None and ind > pending[0]:
                out.append((pending[1], s[len("/url: ") :].strip(), pending[2]))
            pending = None
            continue
        m = _LINE.match(line)
        if not m:
            continue
        while stack and stack[-1][0] >= ind:
            stack.pop()
        role = m.group(2)
        chrome = any(r in _CHROME for _, r in stack) or role in _CHROME
        pending = (ind, m.group(3) or "", chrome) if role == "link" else None
        stack.append((ind, role))
    return out


def _path(url: str) -> str:
    return urlsplit(url).path.rstrip("/") or "/"


def _named_by(name: str, goal_words: set[str]) -> bool:
    """Every word of a link's name is a word of the goal (``Everly Deluxe Pet Bed``, ``f/books``)."""
    w = _words(name)
    return bool(w) and any(len(x) > 2 for x in w) and all(x in goal_words for x in w)


def _status_lines(page: str) -> list[str]:
    return [m.group(1).strip() for line in page.split("\n") if (m := _STATUS.match(line))]


def _sibling_counts(page: str) -> set[int]:
    """Sizes of the groups of same-role siblings of a page (``listitem`` x 12, ``row`` x 4, ...), and
    each table's rows less its header row."""
    counts: dict[tuple[int, int, str], int] = {}
    stack: list[int] = []  # line numbers of the open ancestors, by indentation
    inds: list[int] = []
    for i, line in enumerate(page.split("\n")):
        m = _LINE.match(line)
        if not m or line.lstrip().startswith("/url:"):
            continue
        ind = len(m.group(1))
        while inds and inds[-1] >= ind:
            inds.pop()
            stack.pop()
        parent = stack[-1] if stack else -1
        key = (parent, ind, m.group(2))
        counts[key] = counts.get(key, 0) + 1
        stack.append(i)
        inds.append(ind)
    out = set(counts.values())
    out |= {n - 1 for (_, _, role), n in counts.items() if role == "row" and n > 1}
    return out


def _tree(page: str) -> list[tuple[str, int, int, bool, str]]:
    """The page's lines as (line, indentation, parent line index or -1, in the site's chrome, role)."""
    out: list[tuple[str, int, int, bool, str]] = []
    stack: list[int] = []
    for line in page.split("\n"):
        s = line.lstrip()
        ind = len(line) - len(s)
        while stack and out[stack[-1]][1] >= ind:
            stack.pop()
        parent = stack[-1] if stack else -1
        m = _LINE.match(line)
        role = m.group(2) if m and not s.startswith("/url:") else ""
        chrome = role in _CHROME or (parent >= 0 and out[parent][3])
        out.append((line, ind, parent, chrome, role))
        stack.append(len(out) - 1)
    return out


def answer_context_features(goal: str, page: str, answer: str) -> dict[str, float]:
    """Where the answer stands on the final page, beyond its own line.

    - ``answer_in_content``: the answer is a whole value of a line of the page's content (not only of its
      banner, navigation or footer: a category named in the menu is on every page);
    - ``answer_column_goal_word``: the answer is a table cell whose column header holds a goal word
      (``Orders`` for "how many orders").
    """
    a = answer.strip()
    zero = {"answer_in_content": 0.0, "answer_column_goal_word": 0.0}
    if not a:
        return zero
    pat = _value_re(a)
    nodes = _tree(page)
    goal = {w for w in _words(goal) if len(w) > 3} - set(_words(a))
    hits = [i for i, n in enumerate(nodes) if n[4] and pat.search(n[0].lower())]  # not /url lines
    if not hits:
        return zero
    column = False
    stem = {w.rstrip("s") for w in goal}
    for i in (i for i in hits if not nodes[i][3]):
        p = nodes[i][2]
        # A cell: its position among the row's cells, and the header row's cell at that position.
        cell = (
            i
            if nodes[i][4] in ("cell", "gridcell")
            else p
            if p >= 0 and nodes[p][4] in ("cell", "gridcell")
            else -1
        )
        if cell >= 0 and nodes[cell][2] >= 0:
            row = nodes[cell][2]
            cells = [k for k, n in enumerate(nodes) if n[2] == row]
            pos = cells.index(cell)
            headers = [k for k, n in enumerate(nodes) if n[4] == "columnheader"]
            table_headers = [k for k in headers if k < cell]
            if table_headers:
                head_row = nodes[table_headers[-1]][2]
                hs = [k for k, n in enumerate(nodes) if n[2] == head_row]
                if pos < len(hs) and stem & {w.rstrip("s") for w in _words(nodes[hs[pos]][0])}:
                    column = True
    return {
        "answer_in_content": float(any(not nodes[i][3] for i in hits)),
        "answer_column_goal_word": float(column),
    }


def trajectory_features(
    goal: str, steps: Sequence[tuple[dict[str, Any], str]], final: dict[str, Any], answer: str
) -> dict[str, float]:
    """Features of how an episode reached its final page (the steps that act, :func:`acted_steps`).

    - ``goal_values_typed``: share of the goal's quoted values and numbers typed into fields over the
      episode;
    - ``last_step_new_url``: the last action changed the URL (a navigation ended the episode);
    - ``status_line`` / ``status_new``: the final page shows a flash message (``status``/``alert`` role) /
      one that the page before the last action did not show;
    - ``goal_link_followed``: the final URL is where a link named by the goal (every word of its name in
      the goal) on an earlier page of the episode points;
    - ``goal_link_pending``: the final page's content (not its banner or navigation) still holds a link
      named by the goal that points elsewhere;
    - ``answer_counts_items``: a count answer equals the size of a group of same-role siblings of the
      final page (the rows or list items it counted);
    - ``goal_values_in_named_fields`` / ``goal_values_in_other_fields``: share of the goal's values typed
      into a field whose name has a goal word (``Price`` for "set the price … to $35.90") / into one whose
      name has none.
    """
    acted = acted_steps(steps)
    page = str(final.get("axtree", ""))
    values = [v.strip("“”\"'").lower() for v in _VALUE.findall(goal)]
    typed = [v.lower() for _, a in acted if (v := action_value(a))]
    gw = set(_words(goal))
    fin_path = _path(str(final.get("url", "")))
    followed = any(
        _named_by(name, gw) and _path(url) == fin_path
        for o, _ in acted
        for name, url, _ in page_links(str(o.get("axtree", "")))
    )
    pending = any(
        _named_by(name, gw) and not chrome and _path(url) != fin_path
        for name, url, chrome in page_links(page)
    )
    stems = {w.rstrip("s") for w in gw if len(w) > 2}
    named, other = set(), set()
    for o, a in acted:
        typed_value, bid = action_value(a).lower(), action_target(a)
        if not typed_value or not bid:
            continue
        field_line, _ = element_block(str(o.get("axtree", "")), bid)
        label = _PAGE_STRING.search(field_line)
        label_stems = {w.rstrip("s") for w in _words(label.group(1))} if label else set()
        for v in values:
            if v.lstrip("$") in typed_value:
                (named if label_stems & stems else other).add(v)
    status = _status_lines(page)
    before = str(acted[-1][0].get("axtree", "")) if acted else ""
    ans = answer.strip()
    return {
        "goal_values_typed": (sum(any(v.lstrip("$") in t for t in typed) for v in values) / len(values))
        if values
        else 0.0,
        "last_step_new_url": float(
            bool(acted) and str(acted[-1][0].get("url", "")) != str(final.get("url", ""))
        ),
        "status_line": float(bool(status)),
        "status_new": float(any(s and s not in before for s in status)),
        "goal_link_followed": float(followed),
        "goal_link_pending": float(pending),
        "answer_counts_items": float(ans.isdigit() and int(ans) in _sibling_counts(page)),
        "goal_values_in_named_fields": len(named) / len(values) if values else 0.0,
        "goal_values_in_other_fields": len(other - named) / len(values) if values else 0.0,
    }


def features(
    goal: str,
    kind: str,
    steps: Sequence[tuple[dict[str, Any], str]],
    final: dict[str, Any],
    answer: str | None,
    infeasible: bool = False,
    shapes: Collection[str] | None = None,
) -> dict[str, float]:
    """The feature vector (by name) of one episode: ``steps`` are (observation, action) pairs; ``shapes``
    are the :func:`answer_shape` of the template's successful answers in training (``None``: a template
    never seen; any answer's shape then counts as fitting, so unseen templates are judged as before)."""
    page = str(final.get("axtree", ""))
    low = page.lower()
    page_words = set(_words(page))
    ans = (answer or "").strip()
    aw = _words(ans)
    values = [v.strip("“”\"'").lower() for v in _VALUE.findall(goal)]
    gw = [w for w in _words(goal) if len(w) > 3]
    title_w = set(_words(str(final.get("title", ""))))
    url_w = set(_words(str(final.get("url", "")).split("/", 3)[-1]))
    want = expected_types(goal)
    url_text = unquote_plus(str(final.get("url", "")).split("/", 3)[-1]).lower()
    title_url = f"{str(final.get('title', '')).lower()} {url_text}"
    submits = 0
    for o, a in steps:
        bid = action_target(a)
        if bid and a.lstrip().startswith("click"):
            line, _ = element_block(str(o.get("axtree", "")), bid)
            submits += bool(_SUBMIT.search(line)) and line.startswith("button")
    # A multi-part answer ("2; Blue Kettle, Red Mug") is judged by its values: each on the page, etc.
    items, count = answer_items(ans)

    def each(check: Any) -> bool:
        # A leading count needs no place on the page when it counts the answer's own list ("2; A, B").
        return (
            bool(items)
            and all(check(x) for x in items)
            and (count is None or count == len(items) or check(str(count)))
        )

    base = {
        "bias": 1.0,
        "has_answer": float(bool(ans)),
        "answer_in_page": float(each(lambda x: x.lower() in low)),
        "answer_token_frac": (sum(w in page_words for w in aw) / len(aw)) if aw else 0.0,
        "goal_values_in_page": (sum(v in low for v in values) / len(values)) if values else 0.0,
        "goal_words_in_title": (sum(w in title_w for w in gw) / len(gw)) if gw else 0.0,
        "goal_words_in_url": (sum(w in url_w for w in gw) / len(gw)) if gw else 0.0,
        "submits": float(min(submits, 3)),
        "infeasible": float(infeasible),
        # Where the answer stands: goal words beside it on its line ("Price: $11.64" for a price question),
        # and how much of it the goal already says (a random agent echoes the goal's product name).
        "answer_line_goal_words": max((_line_goal_words(page, x, gw) for x in items), default=0.0),
        "answer_in_goal": (sum(w in set(_words(goal)) for w in aw) / len(aw)) if aw else 0.0,
        "answer_shape_seen": float(bool(ans) and (shapes is None or answer_shape(ans) in shapes)),
        # Does the answer have the form the question asks for (a price for "what is the price", a count
        # for "how many", ...)? Read off the goal's wording, so it holds on templates never seen.
        "answer_type_known": float(bool(ans) and bool(want)),
        "answer_type_fits": float(
            bool(ans) and (answer_type(ans) in want or any(answer_type(x) in want for x in items))
        ),
        # The answer as a whole value of the page ("3" in `cell "3"`, not in "$3,603.28"), and whether
        # it stands only in controls' names (a button's label: what a random agent reads out).
        "answer_value_on_page": float(each(lambda x: _value_on_page(page, x))),
        "answer_on_control": float(each(lambda x: _only_on_controls(page, x))),
        # Navigation: the goal's quoted values and numbers in the final title or (decoded) URL.
        "goal_values_in_title_url": (sum(v in title_url for v in values) / len(values)) if values else 0.0,
        # A confirmation in the URL (a flash message after a form post: ``?msg=Vote+recorded``).
        "confirm_words_url": float(bool(_CONFIRM.search(url_text))),
        # Removal: the goal's values were on a page of the trajectory and are gone from the final one.
        "goal_values_left_page": (
            sum(v not in low and any(v in str(o.get("axtree", "")).lower() for o, _ in steps) for v in values)
            / len(values)
        )
        if values
        else 0.0,
    }
    base.update(trajectory_features(goal, steps, final, ans))
    if count is not None:
        # The count of a "N; item, item" answer agrees with its own list, or counts a group on the page.
        base["answer_counts_items"] = float(
            count == len(items) or base["answer_counts_items"] or count in _sibling_counts(page)
        )
    parts = [answer_context_features(goal, page, x) for x in items] if len(items) > 1 else []
    base.update(
        {k: max(p[k] for p in parts) for k in parts[0]}
        if parts
        else answer_context_features(goal, page, items[0] if items else ans)
    )
    out = dict(base)
    for k in KINDS:
        on = float(kind == k)
        for name, v in base.items():
            out[f"{k}*{name}"] = v if on else 0.0
    return out


def _value_re(answer: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.,$-])" + re.escape(answer.strip().lower()) + r"(?![\w]|[.,]\d)")


def _value_on_page(page: str, answer: str) -> bool:
    """The answer stands on the page as a whole value (not inside a longer word or number)."""
    return bool(answer.strip()) and _value_re(answer).search(page.lower()) is not None


def _only_on_controls(page: str, answer: str) -> bool:
    """Every page line holding the answer as a whole value is a control's (button, textbox, ...)."""
    pat = _value_re(answer)
    roles = []
    for line in page.split("\n"):
        if pat.search(line.lower()):
            m = _ROLE.match(line)
            roles.append(m.group(1) if m else "")
    return bool(roles) and all(r in _CONTROLS for r in roles)


def _line_goal_words(page: str, answer: str, goal_words: Sequence[str]) -> float:
    """Most goal words (not part of the answer) on one page line that contains the answer, at most 3."""
    if not answer:
        return 0.0
    low, own, best = answer.lower(), set(_words(answer)), 0
    goal = set(goal_words) - own
    for line in page.split("\n"):
        if low in line.lower():
            best = max(best, len(goal & set(_words(line))))
    return float(min(best, 3))


def _vector(f: dict[str, float], names: Sequence[str]) -> list[float]:
    return [f.get(n, 0.0) for n in names]


def _corrupt(answer: str, rng: random.Random) -> str:
    digits = [i for i, c in enumerate(answer) if c.isdigit()]
    if digits:
        i = rng.choice(digits)
        return answer[:i] + str((int(answer[i]) + rng.randint(1, 8)) % 10) + answer[i + 1 :]
    return answer + " (not sure)" if answer else "unknown"


def answer_shapes(rows: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """Template -> the :func:`answer_shape` of its successful episodes' answers."""
    out: dict[str, set[str]] = {}
    for e in episodes(rows):
        if e and e[-1].get("reward", 0) >= 1.0:
            ans, _ = answer_of(e[-1]["action"])
            if ans:
                out.setdefault(template_of(e[0]["task_id"]), set()).add(answer_shape(ans))
    return {k: sorted(v) for k, v in out.items()}


def reward_examples(
    rows: Sequence[dict[str, Any]],
    kinds: dict[str, str],
    seed: int = 0,
    shapes: dict[str, Collection[str]] | None = None,
    unseen: float = 0.0,
) -> list[tuple[dict[str, float], int, str]]:
    """(features, label, why) for the positives and negatives described in the module docstring.

    ``shapes``: template -> answer shapes of the *training* data (default: those of ``rows``; pass the
    model's :attr:`RewardModel.shapes` when measuring held-out rows). ``unseen``: the share of
    templates treated as never seen (no answer shapes), so that a model trained on these examples also
    learns what tells answers apart on a template it has not seen (:data:`UNSEEN_SHARE`)."""
    rng = random.Random(seed)
    shapes = answer_shapes(rows) if shapes is None else shapes
    if unseen > 0:
        pick = random.Random(f"unseen-{seed}")
        shapes = {t: v for t, v in sorted(shapes.items()) if pick.random() >= unseen}
    eps = [e for e in episodes(rows) if e and e[-1].get("reward", 0) >= 1.0]
    answers: dict[str, set[str]] = {}
    for e in eps:
        ans, _ = answer_of(e[-1]["action"])
        if ans is not None:
            answers.setdefault(template_of(e[0]["task_id"]), set()).add(ans)
    out: list[tuple[dict[str, float], int, str]] = []
    for e in episodes(rows):
        # Real failures (ε-random or otherwise failed runs, scored by the LiveWeb evaluator): an episode
        # that ended (stopped, or cut at the horizon) without reward 1.
        if e and e[-1].get("reward", 0) < 1.0 and (e[-1].get("done") or e[-1].get("truncated")):
            tid = e[0]["task_id"]
            kind = kinds.get(template_of(tid), "info")
            steps = [(r["obs"], r["action"]) for r in e]
            ans, inf = answer_of(e[-1]["action"])
            sh = shapes.get(template_of(tid))
            feats = features(e[0].get("goal", ""), kind, steps, e[-1]["next_obs"], ans, inf, sh)
            out.append((feats, 0, "real failure"))
    for e in eps:
        tid = e[0]["task_id"]
        kind = kinds.get(template_of(tid), "info")
        goal = e[0].get("goal", "")
        steps = [(r["obs"], r["action"]) for r in e]
        final = e[-1]["next_obs"]
        ans, inf = answer_of(e[-1]["action"])
        sh = shapes.get(template_of(tid))
        out.append((features(goal, kind, steps, final, ans, inf, sh), 1, "expert"))
        if kind == "info" and ans is not None:
            others = sorted(answers.get(template_of(tid), set()) - {ans})
            wrong = rng.choice(others) if others and rng.random() < 0.5 else _corrupt(ans, rng)
            if wrong != ans:
                out.append((features(goal, kind, steps, final, wrong, False, sh), 0, "corrupted answer"))
            # Another string of the final page as the answer (what a random agent says).
            page_strings = sorted(set(_PAGE_STRING.findall(str(final.get("axtree", "")))) - {ans})
            if page_strings:
                word = rng.choice(page_strings)
                out.append((features(goal, kind, steps, final, word, False, sh), 0, "page string answer"))
            if len(e) > 1:
                k = rng.randint(1, len(e) - 1)
                out.append(
                    (features(goal, kind, steps[:k], e[k]["obs"], None, False, sh), 0, "truncated, no answer")
                )
        elif len(e) > 1:
            changing = [
                i for i, r in enumerate(e[:-1]) if r["obs"].get("axtree") != r["next_obs"].get("axtree")
            ]
            if changing:
                k = rng.randint(0, changing[-1])  # stop before the last change
                out.append(
                    (
                        features(goal, kind, steps[:k], e[k]["obs"], ans, inf, sh),
                        0,
                        "truncated before the last change",
                    )
                )
    return out


class RewardModel:
    """Logistic regression over :func:`features`; ``score`` is P(success)."""

    def __init__(
        self,
        names: Sequence[str],
        coef: Sequence[float],
        mean: Sequence[float],
        scale: Sequence[float],
        kinds: dict[str, str] | None = None,
        threshold: float = 0.5,
        shapes: dict[str, Sequence[str]] | None = None,
    ) -> None:
        self.names, self.coef, self.mean, self.scale = list(names), list(coef), list(mean), list(scale)
        self.kinds = dict(kinds or {})
        self.threshold = float(threshold)
        #: Template -> answer shapes of its training successes (:func:`answer_shapes`).
        self.shapes = {k: list(v) for k, v in (shapes or {}).items()}

    @classmethod
    def fit(
        cls,
        examples: Sequence[tuple[dict[str, float], int, str]],
        kinds: dict[str, str],
        c: float = 1.0,
        shapes: dict[str, Sequence[str]] | None = None,
    ) -> RewardModel:
        """Fit on :func:`reward_examples`; ``shapes``: the training data's :func:`answer_shapes` (kept for
        scoring)."""
        import numpy as np
        from sklearn.linear_model import LogisticRegression

        names = sorted({n for f, _, _ in examples for n in f} - {"bias"} | {"bias"})
        x = np.array([_vector(f, names) for f, _, _ in examples], dtype=float)
        y = np.array([lab for _, lab, _ in examples])
        if len(set(y.tolist())) < 2:
            raise ValueError("the reward model needs both successes and failures")
        mean, scale = x.mean(0), x.std(0)
        scale[scale == 0] = 1.0
        mean[names.index("bias")], scale[names.index("bias")] = 0.0, 1.0
        clf = LogisticRegression(C=c, max_iter=2000, fit_intercept=False).fit((x - mean) / scale, y)
        return cls(names, clf.coef_[0].tolist(), mean.tolist(), scale.tolist(), kinds, shapes=shapes)

    def score_features(self, f: dict[str, float]) -> float:
        z = sum(
            w * (v - m) / s
            for w, v, m, s in zip(self.coef, _vector(f, self.names), self.mean, self.scale, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def score(
        self,
        task_id: str,
        goal: str,
        steps: Sequence[tuple[dict[str, Any], str]],
        final: dict[str, Any],
        answer: str | None,
        infeasible: bool = False,
    ) -> float:
        """P(success) of an episode of ``task_id`` ending on ``final`` with ``answer``."""
        template = template_of(task_id)
        kind = self.kinds.get(template, "info")
        return self.score_features(
            features(goal, kind, steps, final, answer, infeasible, self.shapes.get(template))
        )

    def save(self, path: str | Path) -> None:
        Path(path).write_text(
            json.dumps(
                {
                    "names": self.names,
                    "coef": self.coef,
                    "mean": self.mean,
                    "scale": self.scale,
                    "kinds": self.kinds,
                    "threshold": self.threshold,
                    "shapes": self.shapes,
                },
                indent=1,
            )
        )

    @classmethod
    def load(cls, path: str | Path) -> RewardModel:
        p = Path(path)
        if p.is_dir():
            p = p / "reward.json"
        if not p.exists():
            raise ValueError(
                f"no reward model at {p}; train one with `lynn train reward-model --data DIR --out DIR`"
            )
        d = json.loads(p.read_text())
        stale = sorted({n.split("*")[-1] for n in d["names"]} - set(BASE_FEATURES))
        if stale:
            import warnings

            warnings.warn(
                f"{p} was trained on features this version no longer computes ({', '.join(stale)}): they "
                "score as 0; retrain it with `lynn train reward-model --data DIR --out DIR`",
                stacklevel=2,
            )
        return cls(
            d["names"],
            d["coef"],
            d["mean"],
            d["scale"],
            d.get("kinds"),
            d.get("threshold", 0.5),
            d.get("shapes"),
        )


def evaluate_reward(
    model: RewardModel, examples: Sequence[tuple[dict[str, float], int, str]]
) -> dict[str, float]:
    """Accuracy (at the model's threshold) and ROC AUC."""
    from lynn.envs.worldmodel.metrics import roc_auc

    scores = [model.score_features(f) for f, _, _ in examples]
    labels = [lab for _, lab, _ in examples]
    acc = sum((s >= model.threshold) == bool(y) for s, y in zip(scores, labels, strict=True)) / max(
        1, len(labels)
    )
    return {"n": len(labels), "positives": sum(labels), "accuracy": acc, "auc": roc_auc(labels, scores)}


def train_reward_model(
    data: Sequence[str], out: str, seed: int = 0, all_templates: bool = False
) -> dict[str, Any]:
    """``lynn train reward-model``: fit on the train split (held-out templates removed unless ``all_templates``),
    measure on the held-out sets, write ``reward.json`` into ``out``."""
    from lynn.envs.worldmodel.data import heldout_sets, read_transitions, training_split

    rows = read_transitions(*data)
    train = [r for r in rows if r.get("split") == "train"] if all_templates else training_split(rows)
    kinds = task_kinds()
    shapes = answer_shapes(train)
    model = RewardModel.fit(
        reward_examples(train, kinds, seed, shapes, unseen=UNSEEN_SHARE), kinds, shapes=shapes
    )
    Path(out).mkdir(parents=True, exist_ok=True)
    model.save(Path(out) / "reward.json")
    summary: dict[str, Any] = {"train": evaluate_reward(model, reward_examples(train, kinds, seed, shapes))}
    for name, held in heldout_sets(rows).items():
        if held:
            summary[name] = evaluate_reward(model, reward_examples(held, kinds, seed + 1, shapes))
    summary["out"] = str(Path(out) / "reward.json")
    return summary


class SelfAssessReward:
    """Self-assessment by a policy LM (any :mod:`lynn.lm.backends` generator): P(success) is 1 when it
    answers yes to "did the agent complete the goal?" about the final page, else 0."""

    def __init__(self, generator: Any, max_page_chars: int = 3000) -> None:
        self.generator = generator
        self.max_page_chars = max_page_chars

    def score(
        self,
        task_id: str,
        goal: str,
        steps: Sequence[tuple[dict[str, Any], str]],
        final: dict[str, Any],
        answer: str | None,
        infeasible: bool = False,
    ) -> float:
        msgs = [
            {"role": "system", "content": "You judge web agents. Reply yes or no."},
            {
                "role": "user",
                "content": f"Goal: {goal}\nActions: {'; '.join(a for _, a in steps)}\nAnswer: {answer or 'none'}\n"
                f"Final URL: {final.get('url', '')}\nFinal page:\n{str(final.get('axtree', ''))[: self.max_page_chars]}\n"
                "Did the agent complete the goal? yes or no.",
            },
        ]
        text = self.generator.generate([msgs], max_new_tokens=4)[0].text.strip().lower()
        return 1.0 if text.startswith("yes") else 0.0
