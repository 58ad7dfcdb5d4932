"""``Lynn/LiveWeb-v0`` on the bundled sites: observations, actions, tasks, evaluation, expert and random agents."""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import lynn  # noqa: F401
from lynn.agents.web_expert import WebExpert, find_elements
from lynn.envs.liveweb.liveweb_env import LiveWebEnv
from lynn.envs.liveweb.tasks import BUNDLED, load_tasks
from tests.envs.liveweb._split import in_two

ALL_TASKS = load_tasks()


@pytest.fixture(scope="module")
def env() -> Iterator[LiveWebEnv]:
    e = LiveWebEnv()
    yield e
    e.close()


def _run(
    env: LiveWebEnv, agent, task_id: str, max_steps: int = 30, seed: int = 0
) -> tuple[float, dict, list[str]]:
    obs, info = env.reset(options={"task_id": task_id})
    agent.reset(seed=seed)
    actions = []
    for _ in range(max_steps):
        action = agent.act(obs, info)
        actions.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return float(reward), info, actions
    return 0.0, info, actions


def test_task_bank_is_webarena_format_and_split_by_instance() -> None:
    assert len(ALL_TASKS) >= 500
    templates = {t["intent_template_id"] for t in ALL_TASKS}
    assert len(templates) >= 60
    kinds = {(t["sites"][0], t["kind"]) for t in ALL_TASKS}
    assert kinds == {(s, k) for s in ("shop", "forum", "admin") for k in ("info", "nav", "modify")}
    for t in ALL_TASKS:
        for key in (
            "sites",
            "task_id",
            "require_login",
            "start_url",
            "intent_template",
            "instantiation_dict",
            "intent",
            "eval",
        ):
            assert key in t, (t["task_id"], key)
        assert set(t["eval"]["eval_types"]) <= {
            "string_match",
            "url_match",
            "program_html",
            "db_check",
            "page_list",
        }
        assert t["start_url"].startswith("__")
    for tid in templates:  # every template has instances in both splits
        splits = {t["split"] for t in ALL_TASKS if t["intent_template_id"] == tid}
        assert splits == {"train", "test"}
    assert len({(t["intent"], json.dumps(t["login"], sort_keys=True)) for t in ALL_TASKS}) == len(ALL_TASKS)
    test_ids = {t["task_id"] for t in LiveWebEnv.list_tasks(split="test")}
    train_ids = {t["task_id"] for t in LiveWebEnv.list_tasks(split="train")}
    assert test_ids and train_ids and not test_ids & train_ids and len(test_ids | train_ids) == len(ALL_TASKS)


def test_committed_task_file_is_what_the_generator_writes() -> None:
    from lynn.envs.liveweb.sites.server import pristine_dir
    from lynn.envs.liveweb.tasks.generate import generate

    assert generate(pristine_dir()) == json.loads(BUNDLED.read_text(encoding="utf-8"))


def test_reset_gives_goal_axtree_with_ids_and_logs_in(env: LiveWebEnv) -> None:
    obs, info = env.reset(options={"task_id": "shop.my_order_status.0"})
    assert (
        obs["goal"] == "What is the status of my order #105, and what was its total?"
        and info["task_id"] == "shop.my_order_status.0"
    )
    assert obs in env.observation_space
    assert find_elements(obs["axtree"], "link", "My account")  # logged in as the task's customer
    assert "timings" in info and info["error"] is None
    assert obs["open_pages"].startswith("0* http://127.0.0.1:")
    obs, info = env.reset(options={"task_id": "shop.product_price.0"})
    assert find_elements(obs["axtree"], "link", "Sign in")  # a fresh context: no cookies carried over


def test_bad_actions_give_errors_not_exceptions(env: LiveWebEnv) -> None:
    obs, _ = env.reset(options={"task_id": "shop.product_price.0"})
    for action in [
        "definitely not an action(((",
        "click('e99999')",
        "fill('e1', 'x')",
        "tab_focus(3)",
        "goto('https://example.com/')",
        "__import__('os').system('true')",
        42,
    ]:
        obs, reward, terminated, truncated, info = env.step(action)
        assert reward == 0 and not terminated and info["error"], action
        assert obs["last_action_error"] == info["error"]
        assert obs in env.observation_space
    link = find_elements(obs["axtree"], "link", "Books")[0]
    obs, reward, terminated, truncated, info = env.step(f"click('{link}')")
    assert info["error"] is None and obs["title"].startswith("Books") and obs["last_action_error"] == ""


def test_answer_ends_episode_with_evaluated_reward(env: LiveWebEnv) -> None:
    task = next(t for t in ALL_TASKS if t["task_id"] == "forum.subforum_count.0")
    count, newest = task["eval"]["reference_answers"]["must_include"]
    env.reset(options={"task_id": task["task_id"]})
    *_, reward, terminated, _, info = env.step(f"send_msg_to_user({count!r})")  # the count alone
    assert terminated and reward == 0.0 and not info["success"]
    env.reset(options={"task_id": task["task_id"]})
    obs, reward, terminated, _, info = env.step(f"send_msg_to_user({f'{count}; {newest}'!r})")
    assert terminated and reward == 1.0 and info["success"] and info["score"] == 1.0
    obs, reward, terminated, _, info = env.step("noop()")
    assert reward == 0 and "reset" in info["error"]


def test_reset_restores_the_databases(env: LiveWebEnv) -> None:
    tid = "shop.add_to_wishlist.0"
    task = next(t for t in ALL_TASKS if t["task_id"] == tid)
    reward, info, _ = _run(env, WebExpert(env), tid)
    assert reward == 1.0
    env.reset(options={"task_id": tid})
    check = task["eval"]["db_check"][0]
    con = sqlite3.connect(env.server.db_path("shop"))
    assert con.execute(check["query"], check["params"]).fetchone()[0] == 0
    con.close()


def test_user_task_file_with_placeholders(env: LiveWebEnv, tmp_path: Path) -> None:
    task = {
        "sites": ["forum"],
        "task_id": 7,
        "require_login": False,
        "start_url": "__FORUM__/f/books",
        "intent": "Go to the cooking forum",
        "eval": {"eval_types": ["url_match"], "reference_url": "__FORUM__/f/cooking"},
    }
    path = tmp_path / "my_tasks.json"
    path.write_text(json.dumps([task]))
    mine = gym.make("Lynn/LiveWeb-v0", tasks=str(path))
    try:
        assert [t["task_id"] for t in mine.unwrapped.list_tasks(tasks=str(path))] == ["7"]
        obs, info = mine.reset(seed=0)
        assert obs["url"].endswith("/f/books") and info["task_id"] == "7"
        obs, *_ = mine.step(f"click('{find_elements(obs['axtree'], 'link', 'f/cooking')[0]}')")
        obs, reward, terminated, _, info = mine.step("send_msg_to_user('done')")
        assert terminated and reward == 1.0
        assert mine.unwrapped.server.sites == ("forum",)  # only the sites the tasks use are served
    finally:
        mine.close()
    with pytest.raises(ValueError, match="misses"):
        LiveWebEnv(tasks=[{"task_id": "x"}])
    with pytest.raises(FileNotFoundError):
        LiveWebEnv(tasks=str(tmp_path / "missing.json"))


def test_screenshot_and_html_observations() -> None:
    env = LiveWebEnv(split="test", obs_mode="all", viewport=(800, 600), render_mode="rgb_array")
    try:
        obs, _ = env.reset(seed=3)
        assert obs["screenshot"].shape == (600, 800, 3) and obs["screenshot"].dtype == np.uint8
        assert obs["screenshot"].std() > 0  # a rendered page, not a blank buffer
        assert "<html" in obs["html"] and "<style" not in obs["html"]
        assert obs in env.observation_space
        assert env.render().shape == (600, 800, 3)
    finally:
        env.close()


def _one_per_template(split: str | None = None) -> list[str]:
    by_template: dict[int, list[str]] = {}
    for t in ALL_TASKS:
        if split is None or t["split"] == split:
            by_template.setdefault(t["intent_template_id"], []).append(t["task_id"])
    rng = random.Random(0)
    return [rng.choice(ids) for _, ids in sorted(by_template.items())]


# The expert on a seeded instance of every template: tests/envs/liveweb/test_fast_snapshot.py, whose lockstep
# comparison of the fast paths replays those very episodes (one expert run serves both: issue 29).


def _random_runs(env: LiveWebEnv | None, runs: list[tuple[int, str]]) -> list[tuple]:
    """(reward, error, actions) of the random web agent on each (seed, task id), 10 steps at most."""
    from lynn.agents.random_agent import RandomWebAgent

    own = env is None
    env = env or LiveWebEnv()
    try:
        agent = RandomWebAgent(env)
        out = []
        for seed, tid in runs:
            reward, info, actions = _run(env, agent, tid, max_steps=10, seed=seed)
            out.append((reward, info.get("error"), actions))
        return out
    finally:
        if own:
            env.close()


@pytest.mark.slow
def test_random_agent_acts_on_real_elements_and_rarely_succeeds(env: LiveWebEnv) -> None:
    from lynn.agents import resolve_agent
    from lynn.agents.random_agent import RandomAgent, RandomWebAgent
    from lynn.envs.liveweb.actions import parse_action

    assert resolve_agent("random", "Lynn/LiveWeb-v0") is RandomWebAgent
    assert resolve_agent("random-text", "Lynn/LiveWeb-v0") is RandomAgent
    wins, steps, errors, kinds = 0, 0, 0, set()
    tids = _one_per_template("test")[:12]
    runs = in_two(_random_runs, list(enumerate(tids)), env)  # half of them in a second process
    assert len(runs) == len(tids)
    for reward, error, actions in runs:
        wins += reward > 0
        for a in actions:
            parse_action(a)  # every action is a valid action string
            kinds.add(a.split("(")[0])
        steps += len(actions)
        errors += bool(error)
    assert wins / len(tids) <= 0.1
    assert {"click", "fill"} <= kinds, kinds
    assert errors <= len(tids) // 2


def test_expert_with_epsilon_explores_then_recovers(env: LiveWebEnv) -> None:
    agent = WebExpert(env, epsilon=1.0)
    obs, info = env.reset(options={"task_id": "forum.subforum_count.1"})
    agent.reset(seed=1)
    for _ in range(3):  # epsilon = 1: only exploratory actions
        action = agent.act(obs, info)
        assert action.split("(")[0] in {"scroll", "go_back", "click"}
        obs, reward, terminated, truncated, info = env.step(action)
        assert not terminated
    agent.epsilon = 0.0  # it reads where the detour left it (WebExpert.locate) and still solves the task
    actions = []
    for _ in range(6):
        actions.append(agent.act(obs, info))
        obs, reward, terminated, truncated, info = env.step(actions[-1])
        if terminated:
            break
    assert terminated and reward == 1.0
    with pytest.raises(ValueError):
        WebExpert(env, epsilon=2.0)
