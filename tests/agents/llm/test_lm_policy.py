"""LMPolicy: reply parsing, rendering to the model's context, batched acting, and bad generations
reaching the env as clear errors."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import lynn  # noqa: F401
from lynn.agents import make_agent
from lynn.agents.llm import LMPolicy, parse_evm_reply, parse_web_reply
from lynn.lm.backends import Generation, Generator
from lynn.lm.prompts import render


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (
            "```python\ndef execute_skill(w3, a, c):\n    return {}\n```",
            "def execute_skill(w3, a, c):\n    return {}",
        ),
        ("Here you go:\n```py\nx = 1\n```\nthanks", "x = 1"),
        ("```python\nx = 1", "x = 1"),  # cut off by the token budget: the code so far
        ('{"done": true}', '{"done": true}'),
        ("no code at all", "no code at all"),  # returned as is: the env reports it
    ],
)
def test_parse_evm_reply(text: str, want: str) -> None:
    assert parse_evm_reply(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("click('e12')", "click('e12')"),
        ("I will search first.\nfill('e7', 'Dog leash')\n", "fill('e7', 'Dog leash')"),
        ("`send_msg_to_user('$12.50')`", "send_msg_to_user('$12.50')"),
        ("nothing to do", "nothing to do"),
    ],
)
def test_parse_web_reply(text: str, want: str) -> None:
    assert parse_web_reply(text) == want


def test_web_render_cuts_the_axtree_to_the_context_and_keeps_the_goal() -> None:
    obs = {
        "goal": "Find the price",
        "url": "http://x/",
        "title": "T",
        "axtree": "\n".join(f'[e{i}] link "item {i}"' for i in range(200)),
        "last_action": "",
        "last_action_error": "no such element e999",
    }
    full = render("Lynn/LiveWeb-v0", obs)
    assert "… (" not in full[1]["content"]
    short = render("Lynn/LiveWeb-v0", obs, fits=lambda m: len(m[1]["content"]) <= 1200)
    text = short[1]["content"]
    assert len(text) <= 1200 and "Find the price" in text and "no such element e999" in text
    kept = [line for line in text.splitlines() if line.startswith("[e")]
    assert kept == [f'[e{i}] link "item {i}"' for i in range(len(kept))]  # a prefix of whole lines
    assert f"… ({200 - len(kept)} more lines)" in text
    # the largest prefix that fits: one more line would not
    assert (
        len(
            render(
                "Lynn/LiveWeb-v0", {**obs, "axtree": "\n".join(obs["axtree"].splitlines()[: len(kept) + 1])}
            )[1]["content"]
        )
        > 1200 - 40
    )


class _Scripted(Generator):
    """A generator that returns fixed replies: only for driving the policy's parse/act path."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.seen: list = []

    def generate(self, prompts, max_new_tokens=256, stop=None, temperature=0.0, seed=None):
        self.seen.append(list(prompts))
        return [Generation(self.replies[i % len(self.replies)], 10, 5) for i in range(len(prompts))]


def test_unparsable_reply_reaches_the_env_as_a_clear_error() -> None:
    env = gym.make("Lynn/EVMQuest-v0", task="wbnb_deposit")
    try:
        agent = LMPolicy(env, generator=_Scripted(["I cannot help with that."]))
        obs, info = env.reset(seed=1)
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        assert reward == 0.0 and info["error"] and not terminated
        assert agent.prompt_tokens == 10 and agent.completion_tokens == 5
        # the env stays usable: the next (correct) action is scored normally
        amount = obs["instruction"].split()[1]
        good = f'```python\ndef execute_skill(w3, agent_address, contracts):\n    return {{"to": contracts["WBNB"], "data": "0xd0e30db0", "value": w3.to_wei("{amount}", "ether")}}\n```'
        agent.generator = _Scripted([good])
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        assert reward == 1.0 and terminated, info
    finally:
        env.close()


def test_act_batch_sends_one_batch_and_keeps_order() -> None:
    gen = _Scripted(["```python\na = 1\n```", '{"done": true}'])
    agent = LMPolicy(env_id="Lynn/EVMQuest-v0", generator=gen)
    obs = [
        {"instruction": f"task {i}", "contracts": {"WBNB": "0x0"}, "step": 0, "last_result": ""}
        for i in range(3)
    ]
    assert agent.act_batch(obs, [{}] * 3) == ["a = 1", '{"done": true}', "a = 1"]
    assert len(gen.seen) == 1 and len(gen.seen[0]) == 3
    assert "task 2" in gen.seen[0][2][1]["content"]


def test_lm_agent_is_found_by_name_and_refuses_other_envs(tiny_lm: Path) -> None:
    env = gym.make("Lynn/EVMQuest-v0", task="query_gas_price")
    try:
        agent = make_agent("lm", env, model=str(tiny_lm), speculative=None, max_new_tokens=48)
        assert isinstance(agent, LMPolicy) and agent.context == 640
        obs, info = env.reset(seed=2)
        action = agent.act(obs, info)
        assert isinstance(action, str) and action
    finally:
        env.close()
    with pytest.raises(ValueError, match="supports"):
        make_agent("lm", gym.make("CartPole-v1"), model=str(tiny_lm))
