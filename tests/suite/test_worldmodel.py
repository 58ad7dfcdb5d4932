"""``Lynn/WebWorldModel-v0`` on the leaderboard: ``lynn suite --train`` builds its world model from LiveWeb
runs it records itself (by default the suite uses the zoo's), evaluates the expert and random agents on the
test instances of its LiveWeb rows, and prints imagined success beside real success of the same instances.

Real parts only: LiveWeb in Chromium on the bundled sites (``lynn collect`` and ``lynn eval``), the
page-memory world model and the logistic reward model built from those runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._worldmodel_fixtures import TEST_IDS

pytestmark = pytest.mark.slow


def test_expert_and_random_are_registered_for_the_imagined_web(memory_model: Path) -> None:
    import gymnasium as gym

    import lynn  # noqa: F401
    from lynn.agents import available_agents, make_agent
    from lynn.agents.random_agent import RandomWebAgent
    from lynn.agents.web_expert import WebExpert

    assert {"expert", "random"} <= set(available_agents("Lynn/WebWorldModel-v0"))
    env = gym.make("Lynn/WebWorldModel-v0", model=str(memory_model), reward_model=str(memory_model))
    try:
        expert = make_agent("expert", env)
        assert isinstance(expert, WebExpert)
        assert isinstance(make_agent("random", env), RandomWebAgent)
        obs, info = env.reset(seed=0, options={"task_id": TEST_IDS[0]})
        expert.reset(seed=0)
        for _ in range(30):
            obs, reward, terminated, truncated, info = env.step(expert.act(obs, info))
            if terminated or truncated:
                break
        assert terminated, "the expert's plan ends with send_msg_to_user on the imagined pages too"
        assert "score" in info
    finally:
        env.close()


def test_imagined_vs_real_pairs_the_same_instances(memory_model: Path, web_data, tmp_path: Path) -> None:
    from lynn.eval.runner import EvalConfig, evaluate, run_dir
    from lynn.suite.worldmodel import comparison_markdown, imagined_vs_real, real_outcomes

    kw = {"model": str(memory_model), "reward_model": str(memory_model)}
    for agent in ("expert", "random"):
        evaluate(
            EvalConfig(
                "Lynn/WebWorldModel-v0",
                agent=agent,
                split="test",
                tasks=list(TEST_IDS),
                out=str(tmp_path),
                env_kwargs=kw,
                progress=False,
            )
        )
    # Real LiveWeb random episodes of two of the instances (3 steps each: a random agent rarely succeeds).
    evaluate(
        EvalConfig(
            "Lynn/LiveWeb-v0",
            agent="random",
            split="test",
            tasks=list(TEST_IDS[:2]),
            out=str(tmp_path),
            max_steps=3,
            progress=False,
        )
    )
    collected = real_outcomes(web_data["test"])
    assert set(collected) == set(TEST_IDS) and all(collected.values())
    rows = {r["agent"]: r for r in imagined_vs_real(tmp_path, ["expert", "random"], collected)}
    exp, rnd = rows["expert"], rows["random"]
    assert exp["instances"] == len(TEST_IDS) and exp["real"] == 1.0
    assert exp["real_source"].startswith("lynn collect")
    imagined = [
        json.loads(line)
        for line in (
            run_dir(EvalConfig("Lynn/WebWorldModel-v0", "expert", split="test", out=str(tmp_path)))
            / "episodes.jsonl"
        )
        .read_text()
        .splitlines()
    ]
    assert exp["imagined"] == sum(r["success"] for r in imagined) / len(imagined)
    assert rnd["instances"] == 2 and rnd["real_source"] == "LiveWeb-v0 suite episodes"
    assert rnd["real"] == 0.0
    md = comparison_markdown(list(rows.values()))
    assert "| expert | 6 |" in md and "| random | 2 |" in md


def test_lynn_suite_train_builds_the_world_model_and_prints_imagined_next_to_real(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import lynn.suite.worldmodel as suite
    from lynn.cli import main
    from lynn.eval.runner import EvalConfig, run_dir

    monkeypatch.chdir(tmp_path)  # build/suite-worldmodel is relative to the working directory
    # Few train tasks so that the test collects in seconds (the suite's own strides: 4 and 24).
    monkeypatch.setattr(suite, "TRAIN_STRIDE", 64)
    monkeypatch.setattr(suite, "EPS_STRIDE", 192)
    monkeypatch.setattr(suite, "RANDOM_STRIDE", 192)
    calls: list[tuple[str, int, float | None, str]] = []
    real = suite.ensure_suite_world_model

    def counted(test_tasks, train_tasks, collect, **kw):
        def spy(split, ids, out, eps, max_steps, agent):
            calls.append((split, len(ids), eps, agent))
            return collect(split, ids, out, eps, max_steps, agent)

        return real(test_tasks, train_tasks, spy, **kw)

    monkeypatch.setattr(suite, "ensure_suite_world_model", counted)
    args = [
        "suite",
        "--env",
        "Lynn/WebWorldModel-v0",
        "--episodes",
        "2",
        "--no-lm",
        "--no-progress",
        "--train",
    ]
    assert main([*args, "--out", "results"]) == 0
    out = capsys.readouterr().out
    assert [(c[0], c[3]) for c in calls] == [
        ("train", "expert"),
        ("train", "expert"),
        ("train", "random"),
        ("test", "expert"),
    ]
    assert calls[1][2] == suite.EPSILON and calls[3][1] == 2
    folder = tmp_path / "build" / "suite-worldmodel"
    for name in ("worldmodel.json", "memory.jsonl", "starts.jsonl", "reward.json", "suite.json"):
        assert (folder / name).exists(), name
    starts = [json.loads(x) for x in (folder / "starts.jsonl").read_text().splitlines()]
    info = json.loads((folder / "suite.json").read_text())
    assert {s["task_id"] for s in starts if s["split"] == "test"} == set(info["test_tasks"])
    memory = [json.loads(x) for x in (folder / "memory.jsonl").read_text().splitlines()]
    assert memory and all(r["split"] == "train" for r in memory), "test transitions never enter the model"
    assert "Imagined (Lynn/WebWorldModel-v0) vs real (Lynn/LiveWeb-v0)" in out
    table = (tmp_path / "results" / "imagined_vs_real.md").read_text()
    assert "| expert | 2 |" in table and "100.0% | lynn collect" in table
    assert "| random | 0 |" in table  # no LiveWeb rows in this run: nothing real to compare with
    rows = [
        json.loads(x)
        for x in (
            run_dir(EvalConfig("Lynn/WebWorldModel-v0", "expert", split="test", out="results"))
            / "episodes.jsonl"
        )
        .read_text()
        .splitlines()
    ]
    assert sorted(r["task_id"] for r in rows) == sorted(info["test_tasks"])
    # A second run reuses the model and the results (nothing collected again).
    calls.clear()
    assert main([*args, "--out", "results"]) == 0
    assert calls == []
