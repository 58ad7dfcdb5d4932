"""``lynn.envs.worldmodel.crawl``: a breadth-first crawl of the real sites, recorded as transitions a page-memory
world model learns from (and no task start page)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lynn.envs.liveweb.tasks import load_tasks

pytestmark = pytest.mark.slow  # real Chromium on the bundled sites


def test_crawl_records_goto_steps_per_login_state_that_a_world_model_remembers(tmp_path: Path) -> None:
    from lynn.envs.worldmodel.baselines import PageMemory
    from lynn.envs.worldmodel.crawl import crawl, login_states
    from lynn.envs.worldmodel.data import read_transitions, start_pages

    bank = {t["task_id"]: t for t in load_tasks(None)}
    anon, user = bank["shop.product_price.0"], bank["shop.my_order_status.0"]
    assert not anon.get("login") and user.get("login")
    (tmp_path / "tasks.json").write_text(json.dumps([user, anon]))
    assert [t["task_id"] for t in login_states([user, anon])] == [anon["task_id"], user["task_id"]]

    n = crawl(
        tmp_path / "crawl",
        max_pages=6,
        task_files=[str(tmp_path / "tasks.json")],
        bundled=False,
        progress=False,
    )
    rows = read_transitions(tmp_path / "crawl")
    assert n == len(rows) > 5
    assert all(r["action"].startswith('goto("') and r["step"] >= 1 and r["split"] == "train" for r in rows)
    for r in rows:  # each step opened the page it asked for, with no error
        assert r["error"] is None and r["action"][len('goto("') : -2] == r["next_obs"]["url"]
    assert start_pages(rows) == []  # a crawl is no task: no start page for the env to reset to
    by_state: dict[str, set[str]] = {}
    for r in rows:
        by_state.setdefault(r["task_id"], set()).add(r["next_obs"]["url"].split("/", 3)[-1])
    public, own = by_state[f"crawl.{anon['task_id']}"], by_state[f"crawl.{user['task_id']}"]
    assert not public & own  # the logged-in state opens only what the public crawl did not
    assert any(u.startswith("account") for u in own)  # ... its own account pages
    memory = PageMemory(rows)
    assert {"/" + u for u in public | own} <= set(memory.pages)
