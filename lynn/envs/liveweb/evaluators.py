"""WebArena-format evaluators: ``string_match``, ``url_match``, ``program_html`` and two extensions of
ours, ``db_check`` and ``page_list``.

A task's ``eval.eval_types`` lists the evaluators; the task scores the product of their scores (as in
WebArena), each 0 or 1. Evaluators read only the final state: the agent's answer, the active page and
the site databases. These are our strict rules (the default); ``evaluation="webarena"`` scores
WebArena-format files exactly as WebArena's ``evaluation_harness`` does (:mod:`.webarena_eval`).

Extensions (not in WebArena):

- ``db_check``: read-only SQL on a bundled site's database.
- ``page_list``: the active page lists what a reference page lists. ``page_list.reference_url`` is the
  page that shows the wanted listing; the active page must have the same host and path, and the texts
  of the elements matched by ``page_list.locator`` (default ``main table tbody tr``) must equal the
  reference page's, in order, with at least ``page_list.min_items`` (default 1) of them; so must the
  texts matched by the optional ``page_list.also`` (headings, "N found" lines, "Page 2 of 3"). Unlike
  a URL rule it cannot be passed by a URL that shows another result (an extra filter, another page).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

EVAL_TYPES = ("string_match", "url_match", "program_html", "db_check", "page_list")
PAGE_LIST_LOCATOR = "main table tbody tr"


@dataclass
class EvalContext:
    """The final state an evaluator looks at.

    Attributes:
        answer: the text of ``send_msg_to_user`` (``None`` if the agent never answered).
        infeasible: the agent called ``report_infeasible``.
        url: URL of the active page.
        sites: site name -> base URL (for placeholders such as ``__SHOP__``).
        page_text: returns the text of ``locator`` on ``url`` (empty locator: the whole body), after
            running the target's ``prep_actions`` scripts when given as a third argument.
        db: site name -> database file (``db_check``).
        page_items: returns the inner texts of every element matching ``locator`` on ``url``
            (``page_list``).
        intent: the task's goal (for the LLM judge).
        judge: the LLM judge of ``fuzzy_match`` (see :class:`.webarena_eval.LLMJudge`), if configured.
    """

    answer: str | None = None
    infeasible: bool = False
    url: str = ""
    sites: Mapping[str, str] = field(default_factory=dict)
    page_text: Callable[..., str] | None = None
    db: Mapping[str, Path] = field(default_factory=dict)
    page_items: Callable[[str, str], list[str]] | None = None
    intent: str = ""
    judge: Any = None


def fill_placeholders(text: str, sites: Mapping[str, str]) -> str:
    """Replace ``__SHOP__``-style placeholders by the sites' base URLs (no trailing slash)."""
    for name, url in sites.items():
        text = text.replace(f"__{name.upper()}__", url.rstrip("/"))
    return text


def normalize(text: Any) -> str:
    """Lower case, collapsed spaces, no surrounding quotes or final punctuation (WebArena's clean_answer)."""
    s = re.sub(r"\s+", " ", str(text)).strip().lower()
    return s.strip("\"'`").rstrip(".").strip()


_TOKEN = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?![\w])|\w+|[^\w\s]")


def tokens(text: str) -> list[str]:
    """Words, numbers (``-1``, ``1,160.17``, ``4.5`` are one token each) and single punctuation marks."""
    return _TOKEN.findall(text)


def contains_tokens(got: list[str], want: list[str]) -> bool:
    """``want`` occurs in ``got`` as a run of whole tokens: ``"6"`` is not in ``"166"`` nor in ``"6.5"``,
    ``"Elena Silva"`` is in ``"by Elena Silva, 4 stars"``."""
    if not want:
        return True
    n = len(want)
    return any(got[i : i + n] == want for i in range(len(got) - n + 1))


def string_match(ref: Mapping[str, Any], ctx: EvalContext) -> tuple[float, str]:
    """``reference_answers``: ``exact_match`` (str), ``must_include`` (list, ``|OR|`` alternatives; each
    must occur as whole tokens, stricter than WebArena's substring rule: ``"6"`` is not in ``"166"``),
    ``fuzzy_match`` (list: each reference judged by the LLM judge; ``"N/A"``: the task is infeasible,
    passed by ``report_infeasible`` or the answer ``N/A``)."""
    answers = ref.get("reference_answers") or {}
    fuzzy = answers.get("fuzzy_match")
    if fuzzy == "N/A" or answers.get("exact_match") == "N/A":
        if ctx.infeasible or (ctx.answer is not None and normalize(ctx.answer) == "n/a"):
            return 1.0, "reported infeasible"
        return 0.0, "the task is infeasible; expected report_infeasible (or the answer N/A)"
    if ctx.answer is None:
        return 0.0, "no answer was sent (send_msg_to_user)"
    got = normalize(ctx.answer)
    if "exact_match" in answers:
        want = normalize(answers["exact_match"])
        if got != want:
            return 0.0, f"answer {ctx.answer!r} != {answers['exact_match']!r}"
    got_tokens = tokens(got)
    for item in answers.get("must_include") or []:
        alternatives = [tokens(normalize(a)) for a in str(item).split(" |OR| ")]
        if not any(contains_tokens(got_tokens, a) for a in alternatives):
            return 0.0, f"answer {ctx.answer!r} does not include {item!r}"
    if isinstance(fuzzy, list):
        if ctx.judge is None:
            return 0.0, "fuzzy_match needs the LLM judge; pass judge={'base_url': ..., 'model': ...}"
        for item in fuzzy:
            if ctx.judge.fuzzy_match(ctx.answer, str(item), ctx.intent) < 1.0:
                return 0.0, f"the judge found {ctx.answer!r} not equivalent to {item!r}"
    return 1.0, "answer matches"


def _url_parts(url: str) -> tuple[str, str, dict[str, list[str]]]:
    parts = urlsplit(url)
    path = unquote(parts.path).rstrip("/") or "/"
    query: dict[str, list[str]] = {}
    for k, v in parse_qsl(parts.query, keep_blank_values=False):
        query.setdefault(k, []).append(v)
    return f"{parts.scheme}://{parts.netloc}".lower(), path, query


def url_match(ref: Mapping[str, Any], ctx: EvalContext) -> tuple[float, str]:
    """The active page's origin and path equal the reference's and its non-empty query parameters are
    exactly the reference's (order does not matter; extra empty parameters, as a submitted form adds,
    are ignored; an extra non-empty one fails). ``reference_url`` may list alternatives separated by
    ``|OR|``."""
    raw = ref.get("reference_url") or ""
    alts = [a.strip() for a in raw.split("|OR|") if a.strip()]
    if not alts:
        return 0.0, "the task has no reference_url"
    got_origin, got_path, got_query = _url_parts(ctx.url)
    for alt in alts:
        want_origin, want_path, want_query = _url_parts(fill_placeholders(alt, ctx.sites))
        if (want_origin, want_path) != (got_origin, got_path):
            continue
        if {k: sorted(v) for k, v in got_query.items()} == {k: sorted(v) for k, v in want_query.items()}:
            return 1.0, "url matches"
    return 0.0, f"url {ctx.url!r} does not match {raw!r}"


def _items(texts: list[str]) -> list[str]:
    return [re.sub(r"\s+", " ", t).strip() for t in texts]


def page_list(ref: Mapping[str, Any], ctx: EvalContext) -> tuple[float, str]:
    """Our extension: the active page lists exactly what ``page_list.reference_url`` lists (see the
    module docstring)."""
    spec = ref.get("page_list") or {}
    if ctx.page_items is None:
        return 0.0, "page_list needs a browser page"
    want_url = fill_placeholders(str(spec.get("reference_url") or ""), ctx.sites)
    if not want_url:
        return 0.0, "the task has no page_list.reference_url"
    locator = str(spec.get("locator") or PAGE_LIST_LOCATOR)
    if _url_parts(want_url)[:2] != _url_parts(ctx.url)[:2]:
        return 0.0, f"the active page {ctx.url!r} is not the page {want_url!r} shows"
    also = str(spec.get("also") or "")
    try:
        want = _items(ctx.page_items(want_url, locator))
        got = _items(ctx.page_items(ctx.url, locator))
        want_also = _items(ctx.page_items(want_url, also)) if also else []
        got_also = _items(ctx.page_items(ctx.url, also)) if also else []
    except Exception as exc:  # noqa: BLE001  (an unreadable page is a failed check, not a crash)
        return 0.0, f"cannot read {locator!r}: {exc}"
    minimum = int(spec.get("min_items", 1))
    if len(want) < minimum:
        return 0.0, f"the reference page lists {len(want)} items (< {minimum}); the task is broken"
    if got != want:
        return 0.0, f"the page lists {len(got)} items, not the {len(want)} wanted"
    if got_also != want_also:
        return 0.0, f"the page's {also!r} differ from the wanted page's (another query or page)"
    return 1.0, f"the page lists the {len(want)} wanted items"


def program_html(ref: Mapping[str, Any], ctx: EvalContext) -> tuple[float, str]:
    """Each ``program_html`` entry: the text of ``locator`` on ``url`` (``last`` = the final page) must
    satisfy ``required_contents`` (``must_include`` list or ``exact_match``)."""
    if ctx.page_text is None:
        return 0.0, "program_html needs a browser page"
    for target in ref.get("program_html") or []:
        url = target.get("url") or "last"
        url = ctx.url if url == "last" else fill_placeholders(url, ctx.sites)
        try:
            prep = list(target.get("prep_actions") or [])
            text = ctx.page_text(url, target.get("locator") or "", *([prep] if prep else []))
        except Exception as exc:  # noqa: BLE001  (a missing element is a failed check, not a crash)
            return 0.0, f"program_html: cannot read {target.get('locator')!r} on {url}: {exc}"
        got = normalize(text)
        req = target.get("required_contents") or {}
        if "exact_match" in req and got != normalize(req["exact_match"]):
            return 0.0, f"program_html: {got[:80]!r} != {req['exact_match']!r}"
        for item in req.get("must_include") or []:
            if not any(normalize(a) in got for a in str(item).split(" |OR| ")):
                return 0.0, f"program_html: page does not include {item!r}"
    return 1.0, "page content matches"


def db_check(ref: Mapping[str, Any], ctx: EvalContext) -> tuple[float, str]:
    """Each ``db_check`` entry: ``query`` (read-only SQL) on ``site``'s database; its first column of the
    first row must equal ``expected`` (compared as normalized text; ``null`` = no row)."""
    for check in ref.get("db_check") or []:
        path = ctx.db.get(check.get("site", ""))
        if path is None:
            return 0.0, f"db_check: no database for site {check.get('site')!r}"
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = con.execute(check["query"], check.get("params", [])).fetchone()
        except sqlite3.Error as exc:
            return 0.0, f"db_check: query failed: {exc}"
        finally:
            con.close()
        got = None if row is None else row[0]
        want = check.get("expected")
        same = (got is None and want is None) or (
            got is not None and want is not None and _as_text(got) == _as_text(want)
        )
        if not same:
            return (
                0.0,
                f"db_check: {check.get('description', check['query'])} gave {got!r}, expected {want!r}",
            )
    return 1.0, "database state matches"


def _as_text(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return normalize(v)


EVALUATORS: dict[str, Callable[[Mapping[str, Any], EvalContext], tuple[float, str]]] = {
    "string_match": string_match,
    "url_match": url_match,
    "program_html": program_html,
    "db_check": db_check,
    "page_list": page_list,
}


def evaluate(task: Mapping[str, Any], ctx: EvalContext) -> tuple[float, list[str]]:
    """Score ``task`` on ``ctx``: the product of its evaluators' scores, with one message each."""
    spec = task.get("eval") or {}
    score, notes = 1.0, []
    for kind in spec.get("eval_types") or []:
        fn = EVALUATORS.get(kind)
        if fn is None:
            return 0.0, [f"unsupported eval type {kind!r}; supported: {', '.join(EVAL_TYPES)}"]
        s, note = fn(spec, ctx)
        score *= s
        notes.append(f"{kind}: {note}")
    return score, notes
