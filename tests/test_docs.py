"""The README and the docs pages hold together: every relative link (and image) in README.md and
docs/*.md points to a file of the repository, an anchor to a heading of its page, and every docs page
is reachable from the docs index. (Their ```python blocks run in tests/test_readme.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# [text](target) and ![alt](target); a target may carry a "title" after a space.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.S | re.M)
CODE_SPAN = re.compile(r"(`+).+?\1", flags=re.S)


def _prose(text: str) -> str:
    """The page without its fenced blocks and code spans (a link inside code is not a link)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", FENCE.sub("", page.read_text()), flags=re.M)
    return {_slug(h) for h in headings}


def _relative_links(page: Path) -> list[str]:
    links = LINK.findall(_prose(page.read_text()))
    return [t for t in links if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]  # http:, https:, mailto:, ...


def test_pages_have_relative_links() -> None:
    # The parser finds the README's links at all (a broken regex would make the test below vacuous).
    assert {"docs/README.md", "models/README.md"} <= set(_relative_links(REPO / "README.md"))


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_every_relative_link_points_to_a_file(page: Path) -> None:
    broken = []
    for target in _relative_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no {dest.relative_to(REPO) if dest.is_relative_to(REPO) else dest})")
        elif not dest.is_relative_to(REPO):
            broken.append(f"{target} (outside the repository)")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target} (no heading with anchor #{anchor} in {dest.relative_to(REPO)})")
    assert not broken, f"{page.relative_to(REPO)}: broken links: {broken}"


def test_every_docs_page_is_linked_from_the_index() -> None:
    index = REPO / "docs" / "README.md"
    linked = {(index.parent / t.partition("#")[0]).resolve() for t in _relative_links(index)}
    missing = [p.name for p in PAGES[1:] if p != index and p.resolve() not in linked]
    assert not missing, f"docs pages missing from docs/README.md: {missing}"


def test_readme_links_the_docs_index() -> None:
    assert "docs/README.md" in _relative_links(REPO / "README.md")


def test_slug_follows_github() -> None:
    assert _slug("Held-out figures of the zoo's LMs") == "held-out-figures-of-the-zoos-lms"
    assert _slug("Echo wrappers: async vector env and actor-learner") == (
        "echo-wrappers-async-vector-env-and-actor-learner"
    )
    assert _slug("`Lynn/EVMQuest-v0`: write a script") == "lynnevmquest-v0-write-a-script"
