"""Rollouts branched from real expert states (``branch_ratio``): the branch points are the expert's recorded train
states with their prefix, ``Lynn/WebWorldModel-v0`` starts at one and judges the whole episode, and a run with
branching starts its groups there (and one without draws exactly as before)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from lynn.agents.dynaweb.branches import ExpertBranches
from lynn.envs.liveweb.actions import parse_actions
from tests._worldmodel_fixtures import TRAIN_IDS


def test_branch_points_are_recorded_train_states_with_their_prefix(web_data: dict[str, Path]) -> None:
    branches = ExpertBranches.load(web_data["train"])
    assert set(branches.episodes) == set(TRAIN_IDS)  # every expert train episode here has >= 2 steps
    with pytest.raises(ValueError, match="train-split"):
        ExpertBranches.load(web_data["test"])  # held-out instances are never branched from
    rng = np.random.default_rng(0)
    for _ in range(60):
        tid = TRAIN_IDS[int(rng.integers(len(TRAIN_IDS)))]
        b = branches.draw(rng, tid)
        assert b is not None
        ep = branches.episodes[tid][0]
        assert 1 <= b.steps < len(ep)  # never the start page, never past the expert's last action
        assert b.actions() == [s["action"] for s in ep[: b.steps]]
        assert b.obs["url"] == ep[b.steps]["obs"]["url"] and b.obs["axtree"] == ep[b.steps]["obs"]["axtree"]
        assert list(b.replies) == ep[b.steps]["replies"] and len(b.replies) == b.steps
    # k is drawn over the whole episode: the longest one's draws reach every state after the start
    tid = max(TRAIN_IDS, key=lambda t: len(branches.episodes[t][0]))
    n = len(branches.episodes[tid][0])
    assert n >= 3 and {branches.draw(rng, tid).steps for _ in range(20 * n)} == set(range(1, n))  # type: ignore[union-attr]
    assert branches.draw(rng, "shop.unknown.0") is None
    with pytest.raises(ValueError, match="k must be"):
        branches.branch(TRAIN_IDS[0], 0)


def test_the_world_model_starts_at_a_branch_and_judges_prefix_and_rollout(
    memory_model: Path, web_data: dict[str, Path]
) -> None:
    branches = ExpertBranches.load(web_data["train"])
    tid = "admin.set_price.0"  # a task whose success is what the prefix did (the price saved), not the answer
    ep = branches.episodes[tid][0]
    last = branches.branch(tid, len(ep) - 1)
    env = gym.make(
        "Lynn/WebWorldModel-v0",
        model=str(memory_model),
        reward_model=str(memory_model),
        split="train",
        max_steps=2,
    ).unwrapped
    judged: list[tuple] = []  # what the (real) reward model is asked to judge
    score = env.reward_model.score
    env.reward_model.score = lambda *a, **k: judged.append(a) or score(*a, **k)
    obs, info = env.reset(options={"task_id": tid, "branch": last.option()})
    assert info["branch_steps"] == len(ep) - 1
    assert (obs["url"], obs["axtree"], obs["last_action"]) == (
        last.obs["url"],
        last.obs["axtree"],
        last.obs["last_action"],
    )
    _, reward, term, _, info = env.step(ep[-1]["action"])
    assert term and reward == 1.0 and info["success"]
    # the reward model reads the recorded prefix and the rollout as one episode: the expert's recorded pages and
    # actions (calls as step() keeps them), then the rollout's last page and stop
    calls = [str(c) for s in ep for c in parse_actions(s["action"])]
    ((_, _, steps, final, answer, _),) = judged
    assert [c for _, c in steps] == calls and answer == "done"
    assert [p["url"] for p, _ in steps[:-1]] == [s["obs"]["url"] for s in ep[:-1]]
    assert [p["axtree"] for p, _ in steps[:-1]] == [s["obs"]["axtree"] for s in ep[:-1]]
    # the same last action from the start page is judged without the expert's edit before it
    env.reset(options={"task_id": tid})
    _, reward, term, _, _ = env.step(ep[-1]["action"])
    assert term and reward == 0.0 and [c for _, c in judged[-1][2]] == calls[-1:]
    # max_steps counts the policy's steps after the branch, not the prefix
    env.reset(options={"task_id": tid, "branch": branches.branch(tid, 1).option()})
    assert not any(env.step("noop()")[2:4])
    assert env.step("noop()")[3]  # truncated at the second step after the branch
    # a malformed branch is refused before anything changes: the running episode is still there
    env.reset(options={"task_id": tid, "branch": last.option()})
    before = (dict(env.obs), list(env.history))
    for bad in ({"history": []}, {"obs": last.obs, "history": [["page", "click('e1')"]]}):
        with pytest.raises(ValueError, match="branch"):
            env.reset(options={"task_id": tid, "branch": bad})
    with pytest.raises(ValueError, match="task_id"):
        env.reset(options={"branch": last.option()})
    assert (dict(env.obs), list(env.history)) == before
    _, reward, term, _, _ = env.step(ep[-1]["action"])
    assert term and reward == 1.0 and [c for _, c in judged[-1][2]] == calls


def test_a_run_with_branching_starts_its_groups_at_expert_states(run_cfg, web_data: dict[str, Path]) -> None:
    from lynn.agents.dynaweb.train import train_dynaweb

    s = train_dynaweb(run_cfg(branch_ratio=1.0, expert_ratio=0.0, updates=2, groups_per_update=2))
    lengths = {t: len(e[0]) for t, e in ExpertBranches.load(web_data["train"]).episodes.items()}
    for h in s["history"]:
        assert len(h["branch_steps"]) == 2
        assert all(1 <= k < lengths[t] for k, t in zip(h["branch_steps"], h["tasks"], strict=True))
    assert (
        s["real_interactions"]["live_rollout_steps"] == 0
    )  # imagination: the prefix is recorded, not replayed
    out = Path(s["config"]["out"]).parent
    plain = train_dynaweb(run_cfg(expert_ratio=0.0, updates=2, groups_per_update=2, out=str(out / "plain")))
    assert all(k == 0 for h in plain["history"] for k in h["branch_steps"])
    # branching off draws nothing extra: the same tasks as a run before branching existed
    assert [h["tasks"] for h in plain["history"]] == [h["tasks"] for h in s["history"]][
        : len(plain["history"])
    ]


def test_branch_ratio_needs_expert_data(run_cfg) -> None:
    with pytest.raises(ValueError, match="branch_ratio"):
        run_cfg(branch_ratio=1.5)
    with pytest.raises(ValueError, match="expert_data"):
        run_cfg(branch_ratio=0.5, expert_ratio=0.0, expert_data="")


@pytest.mark.slow  # a real browser
def test_live_rl_replays_the_prefix_in_the_browser_and_counts_it(run_cfg, web_data: dict[str, Path]) -> None:
    from lynn.agents.dynaweb.train import train_dynaweb

    s = train_dynaweb(
        run_cfg(
            env="Lynn/LiveWeb-v0",
            branch_ratio=1.0,
            expert_ratio=0.0,
            updates=1,
            horizon=1,
            real_envs=1,
            tasks=["shop.product_price.0"],
        )
    )
    (h,) = s["history"]
    (k,) = h["branch_steps"]
    assert 1 <= k < len(ExpertBranches.load(web_data["train"]).episodes["shop.product_price.0"][0])
    assert h["rollout_steps"] == 2  # one policy step per rollout after the replayed prefix (horizon 1)
    # both rollouts replayed the expert's k steps in the browser: real interactions, counted
    assert s["counts"]["branch_replay_steps"] == 2 * k
    assert s["real_interactions"]["live_rollout_steps"] == 2 + 2 * k
