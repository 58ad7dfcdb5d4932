"""The state-change description Δ (DynaWeb's formulation): its text format, how to compute it from a real
transition, and how to apply it to the current page.

A world model reads (goal, o_t, a_t) and writes Δ; applying Δ to o_t gives the predicted o_{t+1}. Δ is
structured enough to apply and short enough for a small model to write: the new URL and title, the
element-id prefix of the new document, a one-line summary, and line edits of the accessibility tree.

Text format (what a model is trained on and must write; one field per line)::

    [State change]
    URL: /search?q=blue+kettle
    Title: Search · Lynn Shop
    Frame: f1
    Summary: click button "Go" -> opened /search?q=blue+kettle "Search · Lynn Shop"
    [Edits]
    @@ 19 -24 = [e20] heading "Welcome to Lynn Shop" [level=1]
    +    [e20] heading "Search results for “blue kettle”" [level=1]
    +    ...
    [End]

- ``URL`` is relative to the current page's origin when it stays on it (ports of a local site change
  between runs); an absolute URL otherwise.
- ``Frame``: Playwright prefixes every element id of a new document with ``f<n>`` (``[f2e17]``); the
  edits are written over ids *without* that prefix, and ``Frame`` gives the prefix of the next page
  (``-`` for none), so a navigation that keeps the site's header is an edit of the main content only.
- Each hunk ``@@ I -K [= ANCHOR]`` removes ``K`` lines at line index ``I`` (0-based, of the current
  page without id prefix) and inserts the ``+`` lines there (a ``+`` line is the page line verbatim,
  indentation included). ``ANCHOR``, when given, is the text of line ``I`` (the first removed line, or
  the line the insertion goes before): the hunk is placed at the occurrence of that line nearest to
  ``I``, so a slightly wrong index or a Δ retrieved from a similar page still lands; when the anchor is
  not on the page the index alone places the hunk. Optional ``-``
  lines list the removed lines; when present they must match. Hunks are in page order and do not
  overlap.
- The fields come in this order when written; a field left out keeps its current value (URL, title, id
  prefix; an empty summary), so a small model's partial header still applies.
- **Fallback** (documented contract of :func:`apply_delta_text`): text that does not parse as Δ leaves
  the page unchanged (the *copy* prediction) and reports why; a hunk that does not apply is skipped
  and reported; the other hunks still apply.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

HEADER = "[State change]"
EDITS = "[Edits]"
END = "[End]"
_ID_PREFIX = re.compile(r"\[(f\d+)e\d+\]")
_HUNK = re.compile(r"^@@ (\d+) -(\d+)(?: = (.*))?$")
_FIELDS = ("URL", "Title", "Frame", "Summary")


class DeltaError(ValueError):
    """A text that is not a valid Δ; the message says what is wrong."""


@dataclass
class Hunk:
    """Remove ``count`` lines at ``start`` and insert ``added`` there."""

    start: int
    count: int
    added: list[str] = field(default_factory=list)
    anchor: str | None = None
    removed: list[str] | None = None


@dataclass
class Delta:
    """A state change: next URL, title, id prefix (frame), summary and line edits."""

    url: str | None
    title: str | None
    frame: str | None = ""
    summary: str = ""
    hunks: list[Hunk] = field(default_factory=list)

    def to_text(self, removed: bool = False) -> str:
        """The Δ in the documented text format (``removed=True`` also lists removed lines)."""
        out = [HEADER]
        out += [f"URL: {self.url}"] if self.url is not None else []
        out += [f"Title: {self.title}"] if self.title is not None else []
        out += [f"Frame: {self.frame or '-'}"] if self.frame is not None else []
        out += [f"Summary: {self.summary}", EDITS]
        for h in self.hunks:
            out.append(f"@@ {h.start} -{h.count}" + (f" = {h.anchor}" if h.anchor is not None else ""))
            if removed and h.removed:
                out += ["-" + line for line in h.removed]
            out += ["+" + line for line in h.added]
        out.append(END)
        return "\n".join(out)

    @property
    def n_edit_lines(self) -> int:
        return sum(h.count + len(h.added) for h in self.hunks)


# --- ids and URLs -----------------------------------------------------------------------------
def page_frame(axtree: str) -> str:
    """The id prefix of a page (``f2`` for ``[f2e1] ...``), ``""`` when its ids have none."""
    m = re.search(r"\[(f\d+)?e\d+\]", axtree)
    return (m.group(1) or "") if m else ""


def strip_frame(axtree: str, frame: str) -> str:
    """The page with the prefix ``frame`` removed from its element ids."""
    return axtree.replace(f"[{frame}e", "[e") if frame else axtree


def add_frame(axtree: str, frame: str) -> str:
    """The inverse of :func:`strip_frame` (ids already carrying another prefix keep it)."""
    if not frame:
        return axtree
    return re.sub(r"\[e(\d+)\]", lambda m: f"[{frame}e{m.group(1)}]", axtree)


def origin(url: str) -> str:
    p = urlsplit(url)
    return f"{p.scheme}://{p.netloc}" if p.scheme else ""


def relative_url(url: str, base: str) -> str:
    """``url`` without the origin of ``base`` when they share it."""
    o = origin(base)
    if o and url.startswith(o + "/"):
        return url[len(o) :]
    if o and url == o:
        return "/"
    return url


def absolute_url(url: str, base: str) -> str:
    if not url:
        return base
    if urlsplit(url).scheme:
        return url
    return urljoin(origin(base) + "/", url)


# --- summaries --------------------------------------------------------------------------------
_BID_ARG = re.compile(r"""^\s*\w+\(\s*['"]([^'"]+)['"]""")


def element_line(axtree: str, bid: str) -> str:
    """The axtree line of element ``bid`` without indentation and id (``button "Go"``), ``""`` if absent."""
    tag = f"[{bid}] "
    for line in axtree.splitlines():
        s = line.strip()
        if s.startswith(tag):
            return s[len(tag) :].rstrip(":")
    return ""


def action_target(action: str) -> str:
    """The element id an action string names first (``click('e17')`` -> ``e17``), ``""`` if none."""
    m = _BID_ARG.match(action or "")
    return m.group(1) if m and re.fullmatch(r"(?:f\d+)?e\d+", m.group(1)) else ""


def summarize(obs: dict[str, Any], action: str, next_obs: dict[str, Any]) -> str:
    """The reference one-line summary of a real transition (a rule: the data has no written summaries).

    ``<action name> <role "name" of its element> -> <outcome>``, the outcome being ``opened URL "TITLE"``,
    ``page updated (+A -R lines)`` or ``no visible change``.
    """
    name = (action or "").split("(", 1)[0].strip() or "action"
    bid = action_target(action)
    target = element_line(str(obs.get("axtree", "")), bid) if bid else ""
    head = f"{name} {target}".strip()
    url0, url1 = str(obs.get("url", "")), str(next_obs.get("url", ""))
    if url0 != url1:
        return f'{head} -> opened {relative_url(url1, url0)} "{next_obs.get("title", "")}"'
    a = strip_frame(str(obs.get("axtree", "")), page_frame(str(obs.get("axtree", "")))).splitlines()
    b = strip_frame(str(next_obs.get("axtree", "")), page_frame(str(next_obs.get("axtree", "")))).splitlines()
    if a == b:
        return f"{head} -> no visible change"
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    add = sum(j2 - j1 for t, _, _, j1, j2 in sm.get_opcodes() if t in ("replace", "insert"))
    rem = sum(i2 - i1 for t, i1, i2, _, _ in sm.get_opcodes() if t in ("replace", "delete"))
    return f"{head} -> page updated (+{add} -{rem} lines)"


# --- compute / parse / apply -------------------------------------------------------------------
def compute_delta(obs: dict[str, Any], action: str, next_obs: dict[str, Any]) -> Delta:
    """The Δ of a real transition: applying it to ``obs`` gives ``next_obs``'s url, title and axtree."""
    ax0, ax1 = str(obs.get("axtree", "")), str(next_obs.get("axtree", ""))
    f0, f1 = page_frame(ax0), page_frame(ax1)
    a, b = strip_frame(ax0, f0).split("\n"), strip_frame(ax1, f1).split("\n")
    if add_frame("\n".join(b), f1) != ax1:  # mixed prefixes on one page: edit the raw lines instead
        f1 = "="
        a, b = ax0.split("\n"), ax1.split("\n")
    hunks = []
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        anchor = a[i1] if i1 < len(a) else None
        hunks.append(Hunk(i1, i2 - i1, b[j1:j2], anchor, a[i1:i2]))
    return Delta(
        url=relative_url(str(next_obs.get("url", "")), str(obs.get("url", ""))),
        title=str(next_obs.get("title", "")),
        frame=f1,
        summary=summarize(obs, action, next_obs),
        hunks=hunks,
    )


def parse_delta(text: str) -> Delta:
    """Parse the text format (anything before ``[State change]`` is ignored, e.g. a model's reasoning).

    Raises:
        DeltaError: a missing header/field, a malformed hunk header or a line outside a hunk.
    """
    if not isinstance(text, str):
        raise DeltaError(f"a Δ is a text, got {type(text).__name__}")
    i = text.find(HEADER)
    if i < 0:
        raise DeltaError(f"no {HEADER!r} line in the model output {text[:80]!r}")
    lines = text[i + len(HEADER) :].split("\n")
    if lines and lines[0].strip() == "":
        lines = lines[1:]
    values: dict[str, str] = {}
    k = 0
    while k < len(lines) and lines[k].strip() != EDITS:
        name, sep, value = lines[k].partition(":")
        if not sep or name not in _FIELDS or name in values:
            why = "a repeated field" if name in values else f"not one of the fields {', '.join(_FIELDS)}"
            raise DeltaError(f"line {lines[k][:60]!r} of the Δ header is {why}")
        values[name] = value.strip()
        k += 1
    if k >= len(lines):
        raise DeltaError(f"expected {EDITS!r} after the fields")
    k += 1
    hunks: list[Hunk] = []
    ended = False
    for line in lines[k:]:
        if line.strip() == END:
            ended = True
            break
        if line.startswith("@@"):
            m = _HUNK.match(line)
            if not m:
                raise DeltaError(f"malformed hunk header {line[:60]!r}; write '@@ INDEX -COUNT [= ANCHOR]'")
            hunks.append(Hunk(int(m.group(1)), int(m.group(2)), [], m.group(3)))
        elif line.startswith("+") and hunks:
            hunks[-1].added.append(line[1:])
        elif line.startswith("-") and hunks:
            hunks[-1].removed = [*(hunks[-1].removed or []), line[1:]]
        elif line == "" and not hunks:
            continue
        else:
            raise DeltaError(f"line {line[:60]!r} is outside a hunk or lacks its '+'/'-' mark")
    if not ended:
        raise DeltaError(f"the Δ does not end with {END!r} (cut off?)")
    frame = values.get("Frame")
    return Delta(
        values.get("URL"),
        values.get("Title"),
        None if frame is None else ("" if frame == "-" else frame),
        values.get("Summary", ""),
        hunks,
    )


def _place(lines: list[str], h: Hunk, lo: int) -> int | None:
    """Where hunk ``h`` goes in ``lines`` (at or after ``lo``), or None when it cannot be placed."""
    if h.removed:
        n = len(h.removed)
        cands = [i for i in range(lo, len(lines) - n + 1) if lines[i : i + n] == h.removed]
        return min(cands, key=lambda i: abs(i - h.start)) if cands else None
    if h.anchor is not None:
        cands = [i for i in range(lo, len(lines)) if lines[i] == h.anchor]
        if cands:
            return min(cands, key=lambda i: abs(i - h.start))
    # No anchor, or it is not on this page: the index decides (a Δ written for a similar page).
    return h.start if lo <= h.start and h.start + h.count <= len(lines) else None


def apply_delta(obs: dict[str, Any], delta: Delta, action: str = "") -> tuple[dict[str, Any], list[str]]:
    """Apply Δ to an observation; returns the predicted next observation and one message per hunk
    that did not apply (skipped). ``goal``, ``open_pages`` and ``last_action`` follow the env's rules."""
    ax0 = str(obs.get("axtree", ""))
    f0 = page_frame(ax0)
    # A field the Δ leaves out keeps its current value (lenient with small models; documented).
    frame = f0 if delta.frame is None else delta.frame
    raw = frame == "="
    lines = (ax0 if raw else strip_frame(ax0, f0)).split("\n")
    out: list[str] = []
    pos = 0
    problems = []
    for n, h in enumerate(delta.hunks):
        at = _place(lines, h, pos)
        if at is None or h.count < 0 or at + h.count > len(lines):
            problems.append(f"Δ hunk {n + 1} (@@ {h.start} -{h.count}) does not apply to this page; skipped")
            continue
        out += lines[pos:at]
        out += h.added
        pos = at + h.count
    out += lines[pos:]
    axtree = "\n".join(out)
    if not raw:
        axtree = add_frame(axtree, frame)
    url = str(obs.get("url", "")) if delta.url is None else absolute_url(delta.url, str(obs.get("url", "")))
    new = dict(obs)
    new.update(
        url=url,
        title=str(obs.get("title", "")) if delta.title is None else delta.title,
        axtree=axtree,
        open_pages=_open_pages(str(obs.get("open_pages", "")), url),
        last_action=action,
        last_action_error="",
    )
    return new, problems


def _open_pages(open_pages: str, url: str) -> str:
    """The tab list with the active tab (``*``) now at ``url``."""
    rows = open_pages.split("\n") if open_pages else []
    out, hit = [], False
    for row in rows:
        head, _, _ = row.partition(" ")
        if head.endswith("*"):
            out.append(f"{head} {url}")
            hit = True
        else:
            out.append(row)
    return "\n".join(out) if hit else f"0* {url}"


def apply_delta_text(
    obs: dict[str, Any], text: str, action: str = ""
) -> tuple[dict[str, Any], str | None, Delta | None]:
    """Parse a model's Δ text and apply it, never raising on bad model output.

    Returns:
        (next observation, error message or None, the parsed Δ or None). Unparsable text gives the
        current page unchanged (``last_action`` updated) and the parse error.
    """
    try:
        delta = parse_delta(text)
    except DeltaError as exc:
        new = dict(obs)
        new.update(last_action=action, last_action_error="")
        return new, f"world model output is not a valid Δ ({exc}); the page is left unchanged", None
    new, problems = apply_delta(obs, delta, action)
    return new, ("; ".join(problems) if problems else None), delta
