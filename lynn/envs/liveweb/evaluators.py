"""WebArena-format evaluators: ``string_match``, ``url_match``, ``program_html`` and our ``db_check``.

A task's ``eval.eval_types`` lists the evaluators; the task scores the product of their scores (as in
WebArena), each 0 or 1. Evaluators read only the final state: the agent's answer, the active page and
the site databases.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

EVAL_TYPES = ("string_match", "url_match", "program_html", "db_check")


@dataclass
class EvalContext:
    """The final state an evaluator looks at.

    Attributes:
        answer: the text of ``send_msg_to_user`` (``None`` if the agent never answered).
        infeasible: the agent called ``report_infeasible``.
        url: URL of the active page.
        sites: site name -> base URL (for placeholders such as ``__SHOP__``).
        page_text: returns the text of ``locator`` on ``url`` (empty locator: the whole body).
        db: site name -> database file (``db_check``).
    """

    answer: str | None = None
    infeasible: bool = False
    url: str = ""
    sites: Mapping[str, str] = field(default_factory=dict)
    page_text: Callable[[str, str], str] | None = None
    db: Mapping[str, Path] = field(default_factory=dict)


def fill_placeholders(text: str, sites: Mapping[str, str]) -> str:
    """Replace ``__SHOP__``-style placeholders by the sites' base URLs (no trailing slash)."""
    for name, url in sites.items():
        text = text.replace(f"__{name.upper()}__", url.rstrip("/"))
    return text


def normalize(text: Any) -> str:
    """Lower case, collapsed spaces, no surrounding quotes or final punctuation (WebArena's clean_answer)."""
    s = re.sub(r"\s+", " ", str(text)).strip().lower()
    return s.strip("\"'`").rstrip(".").strip()


def string_match(ref: Mapping[str, Any], ctx: EvalContext) -> tuple[float, str]:
    """``reference_answers``: ``exact_match`` (str), ``must_include`` (list), ``fuzzy_match: "N/A"`` (infeasible)."""
    answers = ref.get("reference_answers") or {}
    fuzzy = answers.get("fuzzy_match")
    if fuzzy == "N/A" or answers.get("exact_match") == "N/A":
        return (
            (1.0, "reported infeasible")
            if ctx.infeasible
            else (0.0, "the task is infeasible; expected report_infeasible")
        )
    if ctx.answer is None:
        return 0.0, "no answer was sent (send_msg_to_user)"
    got = normalize(ctx.answer)
    if "exact_match" in answers:
        want = normalize(answers["exact_match"])
        if got != want:
            return 0.0, f"answer {ctx.answer!r} != {answers['exact_match']!r}"
    for item in answers.get("must_include") or []:
        alternatives = [normalize(a) for a in str(item).split(" |OR| ")]
        if not any(a in got for a in alternatives):
            return 0.0, f"answer {ctx.answer!r} does not include {item!r}"
    if isinstance(fuzzy, list):
        for item in fuzzy:  # no LLM judge here: fuzzy phrases must appear literally
            if normalize(item) not in got:
                return 0.0, f"answer {ctx.answer!r} does not include {item!r}"
    return 1.0, "answer matches"


def _url_parts(url: str) -> tuple[str, str, dict[str, list[str]]]:
    parts = urlsplit(url)
    path = unquote(parts.path).rstrip("/") or "/"
    query: dict[str, list[str]] = {}
    for k, v in parse_qsl(parts.query, keep_blank_values=False):
        query.setdefault(k, []).append(v)
    return f"{parts.scheme}://{parts.netloc}".lower(), path, query


def url_match(ref: Mapping[str, Any], ctx: EvalContext) -> tuple[float, str]:
    """The active page's origin and path equal the reference's, and every reference query parameter is
    present with the same value (extra empty parameters, as a submitted form adds, are ignored).
    ``reference_url`` may list alternatives separated by ``|OR|``."""
    raw = ref.get("reference_url") or ""
    got_origin, got_path, got_query = _url_parts(ctx.url)
    for alt in [a.strip() for a in raw.split("|OR|") if a.strip()]:
        want_origin, want_path, want_query = _url_parts(fill_placeholders(alt, ctx.sites))
        if (want_origin, want_path) != (got_origin, got_path):
            continue
        if all(sorted(got_query.get(k, [])) == sorted(v) for k, v in want_query.items()):
            return 1.0, "url matches"
    return 0.0, f"url {ctx.url!r} does not match {raw!r}"


def program_html(ref: Mapping[str, Any], ctx: EvalContext) -> tuple[float, str]:
    """Each ``program_html`` entry: the text of ``locator`` on ``url`` (``last`` = the final page) must
    satisfy ``required_contents`` (``must_include`` list or ``exact_match``)."""
    if ctx.page_text is None:
        return 0.0, "program_html needs a browser page"
    for target in ref.get("program_html") or []:
        url = target.get("url") or "last"
        url = ctx.url if url == "last" else fill_placeholders(url, ctx.sites)
        try:
            text = ctx.page_text(url, target.get("locator") or "")
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
