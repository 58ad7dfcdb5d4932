"""The LiveWeb expert: follows a task's element-level plan using only what the page shows.

Each bundled task carries ``expert``: steps such as ``click link "My orders"``, ``fill textbox "Search
products"``, ``answer by reading r"Price: (\\$[\\d,.]+)"``. The agent finds each element by role and
name in the observed axtree, emits the BrowserGym action string for it, and reads answers off the
observed page; it never touches the site database or the browser directly. Its trajectories are
the expert demonstrations DynaWeb interleaves with imagined rollouts.
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np

from lynn.agents import Agent

_ELEMENT = re.compile(r'^\s*\[(?P<ref>[a-z0-9]+)\] (?P<role>[a-z]+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?', re.M)


def find_elements(axtree: str, role: str, name: str | None = None) -> list[str]:
    """Ids of the elements with ``role`` (and exactly ``name``) in a LiveWeb axtree, in page order."""
    out = []
    for m in _ELEMENT.finditer(axtree):
        if m.group("role") != role:
            continue
        got = (m.group("name") or "").replace('\\"', '"')
        if name is None or got == name:
            out.append(m.group("ref"))
    return out


def read_parts(axtree: str, parts: list[dict[str, Any]]) -> str:
    """An answer of several readings of the page, joined by ``"; "`` (e.g. ``"3; Elena Silva, Ines Garcia"``).

    Each part reads the text from its ``after`` marker on (the whole page without one): ``extract``
    (group 1 of the first match), ``all`` (group 1 of every match, joined by ``", "``) or ``count`` (how
    many matches).
    """
    out = []
    for part in parts:
        text = axtree
        if part.get("after"):
            pos = text.find(part["after"])
            text = text[pos:] if pos >= 0 else ""
        if "count" in part:
            out.append(str(len(re.findall(part["count"], text))))
        elif "all" in part:
            out.append(", ".join(m.group(1) for m in re.finditer(part["all"], text)))
        else:
            m = re.search(part["extract"], text)
            out.append(m.group(1) if m else "?")
    return "; ".join(out)


def quote(text: str) -> str:
    return repr(str(text))


class WebExpert(Agent):
    """Solves bundled LiveWeb tasks by executing their plan through action strings.

    Args:
        env: a LiveWeb env (the plan comes from ``env.unwrapped.task``).
        epsilon: probability of a random exploratory action (clicking a random element, scrolling or
            going back) instead of the plan's. Use it to collect off-expert transitions for world-model
            training.

    The expert acts from any state: whenever the page's last action is not the one it sent (after its own
    exploration, or when it labels the states another agent visits, as DAgger does) or the plan's next
    element is not on the page, it reads where it is (:meth:`locate`): the furthest plan step whose element
    (or, for a reading, whose text) is on this page, backed up over the form steps of that page not yet
    done (a search box not holding its value yet). Only when no step is on the page does it go back to the
    task's start page and restart the plan.
    """

    name = "expert"

    def __init__(self, env: gym.Env, epsilon: float = 0.0) -> None:
        super().__init__(env)
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError("epsilon must be in [0, 1]")
        self.epsilon = float(epsilon)
        self.rng = np.random.default_rng()
        self.plan: list[dict[str, Any]] = []
        self.i = 0
        self.pages_turned = 0

    def reset(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.plan, self.i, self.pages_turned = [], 0, 0
        self._task_id: str | None = None
        self._sent: str | None = None

    def _task(self) -> dict[str, Any]:
        task = getattr(self.env.unwrapped, "task", None) if self.env is not None else None
        if not task or "expert" not in task:
            raise ValueError(
                "the expert needs a LiveWeb task with an 'expert' plan (the bundled tasks have one)"
            )
        return task

    def act(self, obs: dict[str, Any], info: dict[str, Any]) -> str:
        self._explored = False
        action = self._act(obs)
        self._sent = None if self._explored else action  # after exploring, the next page is a detour
        return action

    def _present(self, step: dict[str, Any], axtree: str) -> bool:
        """Whether plan ``step`` can be taken on this page (its element is there; its reading matches)."""
        op = step["op"]
        if op in ("goto", "count", "count_rows") or (op == "answer" and "extract" not in step):
            return False
        if op == "answer":
            text = axtree
            if step.get("after"):
                pos = text.find(step["after"])
                text = text[pos:] if pos >= 0 else ""
            return re.search(step["extract"], text) is not None
        return bool(find_elements(axtree, step["role"], step["name"]))

    def _done_here(self, step: dict[str, Any], axtree: str) -> bool:
        """Whether a form step already holds its value on this page (a filled box, a selected option)."""
        refs = find_elements(axtree, step["role"], step["name"])
        if not refs:
            return False
        line = re.search(rf"^\s*\[{re.escape(refs[0])}\] .*$", axtree, re.M)
        if step["op"] == "fill":
            return bool(line) and line.group(0).rstrip().endswith(": " + str(step["value"]))
        if step["op"] == "select":
            tail = axtree[line.end() :] if line else ""
            return (
                re.match(
                    rf'(?:\n\s*option "[^"]*"(?: \[selected\])?)*?\n\s*option "{re.escape(str(step["value"]))}" \[selected\]',
                    tail,
                )
                is not None
            )
        return False

    def locate(self, axtree: str) -> int | None:
        """The plan step to take on this page (see the class docstring), or None when no step is here."""
        for j in range(len(self.plan) - 1, -1, -1):
            if self._present(self.plan[j], axtree):
                while (
                    j > 0
                    and self.plan[j - 1]["op"] in ("fill", "select")
                    and self._present(self.plan[j - 1], axtree)
                    and not self._done_here(self.plan[j - 1], axtree)
                ):
                    j -= 1
                return j
        return None

    def _act(self, obs: dict[str, Any]) -> str:
        task = self._task()
        if task["task_id"] != getattr(self, "_task_id", None):
            self._task_id = task["task_id"]
            self.plan, self.i, self.pages_turned = list(task["expert"]), 0, 0
        axtree = obs["axtree"]
        if self.epsilon and self.i < len(self.plan) and self.rng.random() < self.epsilon:
            return self._explore(axtree, task)
        detour = bool(obs.get("last_action")) and obs.get("last_action") != self._sent
        here = self.plan[self.i] if self.i < len(self.plan) else None
        lost = here is not None and "role" in here and not find_elements(axtree, here["role"], here["name"])
        if detour or (lost and not find_elements(axtree, "link", "Next page")):
            j = self.locate(axtree)
            if j is not None and not (self.i < len(self.plan) and j < self.i and not detour):
                self.i = j
            elif detour and (self.i >= len(self.plan) or self.plan[self.i]["op"] != "goto"):
                if j is None and not (here is not None and self._present(here, axtree)):
                    from lynn.envs.liveweb.evaluators import fill_placeholders

                    urls = getattr(self.env.unwrapped, "urls", {})
                    self.plan = [{"op": "goto", "url": task.get("start_url", "")}, *task["expert"]]
                    self.i = 0
                    self.pages_turned = 0
                    start = fill_placeholders(self.plan[0]["url"], urls)
                    if start and obs.get("url", "").rstrip("/") == start.rstrip("/"):
                        self.i = 1
        if self.i >= len(self.plan):
            return "send_msg_to_user('done')"
        step = self.plan[self.i]
        op = step["op"]
        if op == "goto":
            self.i += 1
            from lynn.envs.liveweb.evaluators import fill_placeholders

            urls = getattr(self.env.unwrapped, "urls", {})
            return f"goto({quote(fill_placeholders(step['url'], urls))})"
        if op == "answer":
            self.i += 1
            if "text" in step:
                return f"send_msg_to_user({quote(step['text'])})"
            if "parts" in step:
                return f"send_msg_to_user({quote(read_parts(axtree, step['parts']))})"
            text = axtree
            if step.get("after"):
                pos = text.find(step["after"])
                text = text[pos:] if pos >= 0 else ""
            m = re.search(step["extract"], text)
            return f"send_msg_to_user({quote(m.group(1) if m else 'I could not find the answer')})"
        if op == "count":
            self.i += 1
            return f"send_msg_to_user({quote(str(len(re.findall(step['pattern'], axtree))))})"
        if op == "count_rows":
            self.i += 1
            pos = axtree.find(f'table "{step["table"]}"')
            body = axtree[pos:] if pos >= 0 else ""
            rows = len(re.findall(r"^\s*\[\w+\] row\b", body, re.M)) - 1  # minus the header row
            return f"send_msg_to_user({quote(str(max(rows, 0)))})"
        refs = find_elements(axtree, step["role"], step["name"])
        if not refs:
            nxt = find_elements(axtree, "link", "Next page")
            if nxt and self.pages_turned < 20:  # the element may be on a later page of a listing
                self.pages_turned += 1
                return f"click({quote(nxt[0])})"
            self.i = len(self.plan)
            missing = f"cannot find {step['role']} {step['name']!r} on the page"
            return f"report_infeasible({quote(missing)})"
        ref = refs[0]
        self.i += 1
        if op == "click":
            return f"click({quote(ref)})"
        if op == "fill":
            return f"fill({quote(ref)}, {quote(step['value'])})"
        if op == "select":
            return f"select_option({quote(ref)}, {quote(step['value'])})"
        if op in ("check", "uncheck"):
            return f"{op}({quote(ref)})"
        if op == "press":
            return f"press({quote(ref)}, {quote(step['key'])})"
        raise ValueError(f"unknown expert op {op!r}")

    def _explore(self, axtree: str, task: dict[str, Any]) -> str:
        """A random, plausible action; the next step reads where it led (:meth:`locate`)."""
        refs = [m.group("ref") for m in _ELEMENT.finditer(axtree) if m.group("role") in ("link", "button")]
        choice = self.rng.integers(4)
        self._explored = True
        if choice == 0 or not refs:
            return f"scroll(0, {int(self.rng.integers(-400, 800))})"
        if choice == 1:
            return "go_back()"
        return f"click({quote(refs[int(self.rng.integers(len(refs)))])})"
