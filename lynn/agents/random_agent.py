"""The uniform random agent: a floor for every leaderboard."""

from __future__ import annotations

import copy
import re
from typing import Any

import gymnasium as gym
import numpy as np

from lynn.agents import Agent


class RandomAgent(Agent):
    """Samples the env's action space; respects ``obs["action_mask"]`` when the env gives one.

    Works for every registered env: Discrete, Box, Text and Dict action spaces all sample.
    """

    name = "random"

    def __init__(self, env: gym.Env, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        # Its own copy: seeding must not reset the RNG of the env's (shared) space.
        self.action_space = copy.deepcopy(env.action_space)

    def reset(self, seed: int | None = None) -> None:
        self.action_space.seed(seed)

    def act(self, obs: Any, info: dict[str, Any]) -> Any:
        mask = obs.get("action_mask") if isinstance(obs, dict) else None
        if mask is not None and isinstance(self.action_space, gym.spaces.Discrete):
            mask = np.asarray(mask, dtype=np.int8)
            if mask.any():
                return self.action_space.sample(mask=mask)
        return self.action_space.sample()


_WEB_ELEMENT = re.compile(
    r'^(?P<indent>\s*)\[(?P<bid>[a-z0-9]+)\] (?P<role>[a-z]+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?', re.M
)
_OPTION = re.compile(r'^(?P<indent>\s*)(?:\[[a-z0-9]+\] )?option "(?P<name>(?:[^"\\]|\\.)*)"', re.M)
_CLICKABLE = {"link", "button", "checkbox", "radio", "tab", "menuitem", "switch", "option"}
_FILLABLE = {"textbox", "searchbox", "spinbutton"}
_WORDS = ("blue", "kettle", "garden", "report", "10", "25", "2025-03-01", "alice", "great", "hello")


class RandomWebAgent(Agent):
    """A random LiveWeb user: clicks, fills, selects and navigates among the real elements of the observed
    page (BrowserGym action strings), and now and then answers with a word it saw.

    Unlike :class:`RandomAgent` (random text, almost always an unparsable action), every action it takes
    is a valid one on the current page, so its score measures how often a task passes by chance.

    Args:
        env: a LiveWeb env.
        answer_prob: probability of ending the episode with ``send_msg_to_user`` on a step.
    """

    name = "random"

    def __init__(self, env: gym.Env | None = None, answer_prob: float = 0.05, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        if not 0.0 <= answer_prob <= 1.0:
            raise ValueError("answer_prob must be in [0, 1]")
        self.answer_prob = float(answer_prob)
        self.rng = np.random.default_rng()

    def reset(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def _pick(self, seq: list[Any]) -> Any:
        return seq[int(self.rng.integers(len(seq)))]

    def act(self, obs: Any, info: dict[str, Any]) -> str:
        axtree = obs.get("axtree", "") if isinstance(obs, dict) else str(obs)
        elements = [m.groupdict() for m in _WEB_ELEMENT.finditer(axtree)]
        clickable = [e for e in elements if e["role"] in _CLICKABLE]
        fillable = [e for e in elements if e["role"] in _FILLABLE]
        selects = [e for e in elements if e["role"] == "combobox"]
        words = [w for w in re.findall(r'"([^"\\]{1,40})"', axtree) if w.strip()] or list(_WORDS)
        if self.rng.random() < self.answer_prob:
            return f"send_msg_to_user({self._pick(words)!r})"
        choices: list[tuple[float, str]] = [(1.0, "back"), (1.0, "scroll")]
        if clickable:
            choices.append((6.0, "click"))
        if fillable:
            choices.append((2.0, "fill"))
        if selects:
            choices.append((1.0, "select"))
        weights = np.array([w for w, _ in choices])
        kind = choices[int(self.rng.choice(len(choices), p=weights / weights.sum()))][1]
        if kind == "click":
            return f"click({self._pick(clickable)['bid']!r})"
        if kind == "fill":
            value = self._pick(words) if self.rng.random() < 0.5 else self._pick(list(_WORDS))
            return f"fill({self._pick(fillable)['bid']!r}, {value!r})"
        if kind == "select":
            box = self._pick(selects)
            tail = axtree[axtree.find(f"[{box['bid']}] combobox") :].splitlines()[1:]
            options = []
            for line in tail:  # the options listed under the combobox, until the next sibling
                m = _OPTION.match(line)
                if m is None or len(m["indent"]) <= len(box["indent"]):
                    break
                options.append(m["name"])
            if options:
                return f"select_option({box['bid']!r}, {self._pick(options)!r})"
            return f"click({box['bid']!r})"
        if kind == "scroll":
            return f"scroll(0, {int(self._pick([-300, 300, 600]))})"
        return "go_back()"
