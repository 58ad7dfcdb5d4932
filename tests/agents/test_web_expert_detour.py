"""The LiveWeb expert acts from any state (DAgger labels the learner's states with it), and DAgger's
aggregation keeps held-out states out of the training data."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lynn.agents.web_expert import WebExpert
from lynn.envs.liveweb.liveweb_env import LiveWebEnv
from lynn.lm.web_candidates import episode_steps
from lynn.lm.web_dagger import aggregate, rollout_labels


@pytest.fixture(scope="module")
def env() -> Iterator[LiveWebEnv]:
    e = LiveWebEnv()
    yield e
    e.close()


def _finish(
    env: LiveWebEnv, agent: WebExpert, obs: dict, info: dict, steps: int = 8
) -> tuple[list[str], float]:
    actions, reward = [], 0.0
    for _ in range(steps):
        actions.append(agent.act(obs, info))
        obs, reward, terminated, truncated, info = env.step(actions[-1])
        if terminated or truncated:
            break
    return actions, float(reward)


def test_expert_reads_where_it_is_after_a_detour(env: LiveWebEnv) -> None:
    """After another agent searched and opened the product, the expert answers from that page (no restart)."""
    obs, info = env.reset(options={"task_id": "shop.product_price.0"})
    agent = WebExpert(env)
    agent.reset(seed=0)
    box = next(
        line.split("]")[0].strip(" [")
        for line in obs["axtree"].splitlines()
        if 'textbox "Search products"' in line
    )
    for a in (f"fill('{box}', 'Halcyon Smart Notebook')",):
        obs, *_, info = env.step(a)
    go = next(line.split("]")[0].strip(" [") for line in obs["axtree"].splitlines() if 'button "Go"' in line)
    obs, *_, info = env.step(f"click('{go}')")
    actions, reward = _finish(env, agent, obs, info)
    assert actions[0].startswith("click(") and "goto" not in actions[0]  # it clicks the result, no restart
    assert reward == 1.0 and len(actions) == 2


def test_expert_refills_a_form_the_detour_emptied(env: LiveWebEnv) -> None:
    """A detour through a category page: the search box is there again but empty, so the expert fills it
    before pressing Go (it does not click Go on an empty search)."""
    obs, info = env.reset(options={"task_id": "shop.product_price.0"})
    agent = WebExpert(env)
    agent.reset(seed=0)
    cat = next(
        line.split("]")[0].strip(" [") for line in obs["axtree"].splitlines() if 'link "Books"' in line
    )
    obs, *_, info = env.step(f"click('{cat}')")
    actions, reward = _finish(env, agent, obs, info)
    assert actions[0].startswith("fill(") and reward == 1.0


def test_expert_restarts_only_when_nothing_of_the_plan_is_on_the_page(env: LiveWebEnv) -> None:
    obs, info = env.reset(options={"task_id": "forum.subforum_count.1"})
    agent = WebExpert(env)
    agent.reset(seed=0)
    from urllib.parse import urlparse

    u = urlparse(obs["url"])
    obs, *_, info = env.step(f"goto('{u.scheme}://{u.netloc}/no-such-page')")
    assert not any(agent._present(s, obs["axtree"]) for s in env.unwrapped.task["expert"])
    actions, reward = _finish(env, agent, obs, info)
    assert actions[0].startswith("goto(") and reward == 1.0


def test_dagger_labels_learner_states_with_the_expert(env: LiveWebEnv) -> None:
    """A learner that only scrolls: every state it visits is labelled with the expert's action there, the
    history is the learner's, and the records turn into training steps."""

    class Scroller:
        def reset(self, seed: int | None = None) -> None:
            pass

        def act(self, obs: dict, info: dict) -> str:
            return "scroll(0, 200)"

    recs, summary = rollout_labels(
        env, Scroller(), WebExpert(env), [("shop.product_price.0", 0)], max_steps=3
    )
    assert summary == {"episodes": 1, "successes": 0, "states": 3}
    assert all(r["executed"] == "scroll(0, 200)" for r in recs)
    assert all(r["action"].startswith("fill(") for r in recs)  # the expert would search, every time
    assert [len(r["history"]) for r in recs] == [0, 1, 2]
    steps = episode_steps(aggregate([recs]))
    assert steps[2]["history"] == ["scroll(0, 200)"] * 2
    assert steps[2]["reply"].startswith('fill textbox "Search products"')


def test_dagger_refuses_test_split_states(env: LiveWebEnv) -> None:
    ok = [{"split": "train", "task_id": "a", "seed": 0}]
    bad = [{"split": "test", "task_id": "b", "seed": 0}]
    assert aggregate([ok, ok]) == ok + ok
    with pytest.raises(ValueError, match="train-split"):
        aggregate([ok, bad])
    import json

    from lynn.envs.liveweb.tasks.generate import OUT

    test_task = next(t["task_id"] for t in json.loads(OUT.read_text()) if t["split"] == "test")
    with pytest.raises(ValueError, match="test-split"):
        rollout_labels(env, WebExpert(env), WebExpert(env), [(test_task, 0)], max_steps=1)
