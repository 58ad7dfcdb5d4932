"""``lynn collect`` writes transition JSONL; ``lynn sites serve`` serves the bundled sites; ``lynn tasks`` lists."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from lynn.cli import main


def test_collect_writes_transitions(tmp_path: Path) -> None:
    out = tmp_path / "data"
    rc = main(
        [
            "collect",
            "Lynn/LiveWeb-v0",
            "--agent",
            "expert",
            "--epsilon",
            "0.2",
            "--out",
            str(out),
            "--tasks",
            "shop.product_price.0,forum.vote.0",
            "--seed",
            "3",
        ]
    )
    assert rc == 0
    rows = [json.loads(line) for line in (out / "transitions.jsonl").read_text().splitlines()]
    assert {r["task_id"] for r in rows} == {"shop.product_price.0", "forum.vote.0"}
    for r in rows:
        assert set(r) >= {"goal", "obs", "action", "next_obs", "reward", "done"}
        assert isinstance(r["obs"]["axtree"], str) and r["next_obs"]["url"].startswith(
            ("http://127.0.0.1:", "about:")
        )
    by_episode: dict[int, list[dict]] = {}
    for r in rows:
        by_episode.setdefault(r["episode"], []).append(r)
    for steps in by_episode.values():
        assert [s["step"] for s in steps] == list(range(len(steps)))
        assert steps[-1]["done"] and not any(s["done"] for s in steps[:-1])
        for a, b in zip(steps, steps[1:], strict=False):  # consecutive transitions chain
            assert a["next_obs"] == b["obs"]


def test_collect_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collect", "Lynn/LiveWeb-v0", "--epsilon", "1.5"]) == 2
    assert main(["collect", "Lynn/LiveWeb-v0", "--tasks", "no.such.task"]) == 2
    assert "error" in capsys.readouterr().err


def test_sites_serve_prints_urls_and_serves() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "lynn.cli", "sites", "serve", "--sites", "shop,forum", "--seconds", "20"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        first = proc.stdout.readline().split()
        assert first[0] == "shop" and first[1].startswith("http://127.0.0.1:")
        with urllib.request.urlopen(first[1] + "/search?q=kettle", timeout=10) as resp:
            assert resp.status == 200 and b"products found" in resp.read()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        proc.stdout.close()
    assert main(["sites", "serve", "--sites", "nope"]) == 2


def test_tasks_command_lists_splits(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "Lynn/LiveWeb-v0", "--split", "test", "--json"]) == 0
    tasks = json.loads(capsys.readouterr().out)
    assert len(tasks) >= 75 and all(t["split"] == "test" for t in tasks)
