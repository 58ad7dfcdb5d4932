"""What a guesser would answer without doing a task, and plain-HTTP reads of the bundled pages.

The task generator refuses any instance that one of these answers passes, and the tests count, per split,
how many instances each constant passes (at most 1%). The constants are those a guesser tries on any
question: the integers 0-20, yes/no, "done", "N/A", the order statuses, and everything the start page
itself shows (each text on it and each number in those texts).

:class:`PageReader` fetches pages over HTTP from a running :class:`~lynn.envs.liveweb.sites.server.SiteServer`
(logged in as a task's user when it has one), without a browser: a few ms a page.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from html.parser import HTMLParser
from typing import Any

from lynn.envs.liveweb.sites.seed import ORDER_STATUSES

BASE_GUESSES: tuple[str, ...] = (
    *(str(i) for i in range(21)),
    "",
    "yes",
    "no",
    "true",
    "false",
    "done",
    "N/A",
    "none",
    "nothing",
    "unknown",
    *ORDER_STATUSES,
)
_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?")


class _Page(HTMLParser):
    """Visible texts of a page and the number of items its listing shows (``main tbody tr, main li``)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.texts: list[str] = []
        self.listed = 0
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "title", "head"):
            self._skip += 1
        if tag in ("br", "img", "input", "meta", "link", "hr"):
            return
        if "main" in self.stack and (tag == "li" or (tag == "tr" and "tbody" in self.stack)):
            self.listed += 1
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "title", "head"):
            self._skip = max(0, self._skip - 1)
        if tag in self.stack:
            while self.stack and self.stack.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        text = re.sub(r"\s+", " ", data).strip()
        if text and not self._skip:
            self.texts.append(text)


def parse_page(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    page.close()
    return page


def texts_and_numbers(texts: Iterable[str]) -> set[str]:
    """Each text, each ``a: b`` half of it, and each number in it (``$25.31``, ``25.31``, ``12``)."""
    out: set[str] = set()
    for t in texts:
        out.add(t)
        out.update(p.strip() for p in t.split(":") if p.strip())
        for n in _NUMBER.findall(t):
            out.update({n, n.lstrip("$"), n.lstrip("$").replace(",", "")})
    return out


class PageReader:
    """GET pages of the bundled sites as a given user.

    Args:
        urls: site name -> base URL of a running site server.
    """

    def __init__(self, urls: Mapping[str, str]) -> None:
        self.urls = dict(urls)
        self._cookies: dict[tuple[str, str], str] = {}
        self._start: dict[tuple[str, str, str | None], frozenset[str]] = {}

    def _cookie(self, site: str, user: str | None) -> str:
        if not user:
            return ""
        key = (site, user)
        if key not in self._cookies:
            from lynn.envs.liveweb.liveweb_env import _form_login
            from lynn.envs.liveweb.sites.seed import ADMIN_PASSWORD, ADMIN_USER, DEFAULT_PASSWORD

            password = ADMIN_PASSWORD if user == ADMIN_USER else DEFAULT_PASSWORD
            cookies = _form_login(self.urls[site] + "/login", {"username": user, "password": password})
            self._cookies[key] = "; ".join(f"{k}={v}" for k, v in cookies)
        return self._cookies[key]

    def get(self, url: str, site: str, user: str | None = None) -> tuple[int, str]:
        """Status and body of ``url`` (placeholders filled) seen by ``user`` on ``site``."""
        from lynn.envs.liveweb.evaluators import fill_placeholders

        full = urllib.parse.quote(fill_placeholders(url, self.urls), safe=":/?&=%#+,")
        req = urllib.request.Request(full)
        if cookie := self._cookie(site, user):
            req.add_header("Cookie", cookie)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            return exc.code, ""

    def start_page_guesses(self, task: Mapping[str, Any]) -> set[str]:
        """What the task's start page shows, as guesses (see :func:`texts_and_numbers`)."""
        site = task["sites"][0]
        key = (site, task["start_url"], (task.get("login") or {}).get(site))
        if key not in self._start:
            status, html = self.get(key[1], site, key[2])
            self._start[key] = frozenset(texts_and_numbers(parse_page(html).texts) if status == 200 else ())
        return set(self._start[key])

    def page_problem(self, task: Mapping[str, Any]) -> str | None:
        """Why the page a navigation task wants cannot be reached or lists nothing, or ``None``."""
        spec = task["eval"]
        site = task["sites"][0]
        user = (task.get("login") or {}).get(site)
        if "page_list" in spec["eval_types"]:
            pl = spec["page_list"]
            status, html = self.get(pl["reference_url"], site, user)
            if status != 200:
                return f"the wanted page answers HTTP {status}"
            listed = parse_page(html).listed
            if listed < int(pl.get("min_items", 1)):
                return f"the wanted page lists {listed} items"
        if "url_match" in spec["eval_types"]:
            for alt in str(spec.get("reference_url") or "").split(" |OR| "):
                status, _ = self.get(alt.strip(), site, user)
                if status != 200:
                    return f"the wanted page {alt!r} answers HTTP {status}"
        return None
