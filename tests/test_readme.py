"""Every ```python block of the README and of the docs pages (docs/*.md) runs as written (in a fresh
interpreter) and prints what it says it prints: each block that prints has a checker here, picked by
a line of the block, that parses its output and asserts the values (a block that prints and has no
checker fails). Each checker's line is in exactly one block of all those pages, wherever it moves."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, run_python

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# (page, index of the block in its page, code)
BLOCKS = [
    (page.relative_to(REPO).as_posix(), i, code)
    for page in PAGES
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S))
]
README_BLOCKS = [code for page, _, code in BLOCKS if page == "README.md"]


def _env_ids(out: str, code: str) -> None:
    ids = set(re.findall(r"'([^']+)'", out))
    assert {"Lynn/EVMQuest-v0", "Lynn/LiveWeb-v0", "Lynn/WebWorldModel-v0", "Lynn/Coordination-v0"} <= ids, (
        out
    )


def _cartpole_eval(out: str, code: str) -> None:
    success_rate, mean_reward = (float(x) for x in out.split())
    # CartPole pays 1 per step: a random agent's episodes all earn > 0 and the mean reward is the mean
    # episode length, which is in the records the run wrote.
    assert success_rate == 1.0
    root = re.search(r'out="([^"]+)"', code).group(1)
    records = [json.loads(line) for line in (Path(root) / "CartPole-v1" / "random" / "episodes.jsonl").open()]
    assert len(records) == 5 and all(r["reward"] == r["steps"] for r in records)
    assert mean_reward == pytest.approx(sum(r["steps"] for r in records) / 5)
    assert 8 <= mean_reward <= 100  # a random CartPole policy lasts ~10-60 steps


def _evm_wrap(out: str, code: str) -> None:
    m = re.fullmatch(r"(?s)(.*) -> ([\d.]+) (\[.*\])\s*", out)
    assert m, out
    instruction, reward, checks = m.group(1), float(m.group(2)), ast.literal_eval(m.group(3))
    assert re.search(r"\d+\.\d+", instruction) and reward == 1.0
    assert checks and all(passed is True for _, passed in checks), checks


def _web_expert(out: str, code: str) -> None:
    # One line per env: id, task id, goal, "-> reward", reward; the same task in both.
    rows = re.findall(r"^(Lynn/\S+) (\S+) (.+) -> reward ([\d.]+)$", out, flags=re.M)
    assert [env_id for env_id, *_ in rows] == ["Lynn/LiveWeb-v0", "Lynn/WebWorldModel-v0"], out
    (_, real_task, real_goal, real_reward), (_, imagined_task, imagined_goal, imagined_reward) = rows
    assert (real_task, real_goal) == (imagined_task, imagined_goal) and real_goal.strip(), out
    assert float(real_reward) == 1.0, out  # the expert solves the task in the browser
    assert float(imagined_reward) == 1.0, out  # and the zoo's world model + reward model agree


def _coordination(out: str, code: str) -> None:
    m = re.fullmatch(r"success rate ([\d.]+), (\d+)% of the oracle\s*", out)
    assert m, out
    assert 0.85 <= float(m.group(1)) <= 1.0 and 90 <= int(m.group(2)) <= 105


def _actor_learner(out: str, code: str) -> None:
    m = re.fullmatch(r"(\d+) updates, mean return (\d+) -> (\d+)\s*", out)
    assert m, out
    updates, first, last = (int(x) for x in m.groups())
    # Random search on CartPole: a zero-weight policy plus noise lasts ~10-100 steps; 20 updates of 8
    # episodes reach ~400 (of 500); the bar is well below that.
    assert updates == 20 and last > first and last >= 150, out


def _lm(out: str, code: str) -> None:
    m = re.search(r"^([\d,]+) parameters, loss ([\d.]+) -> ([\d.]+)$", out, flags=re.M)
    assert m, out
    assert int(m.group(1).replace(",", "")) > 1000 and float(m.group(3)) < float(m.group(2))
    # then: the instruction, "->", the reward and the error (which may span lines)
    m = re.search(r" -> ([\d.]+) (.*)\Z", out[m.end() :], flags=re.S)
    assert m, out
    reward, error = float(m.group(1)), m.group(2).strip()
    assert reward in (0.0, 1.0), out
    if reward == 0.0:
        assert error and error != "None", out  # a failure says why


# A line of the block -> the checker of its output.
CHECKERS: dict[str, Callable[[str, str], None]] = {
    "print(lynn.ENV_IDS)": _env_ids,
    'EvalConfig("CartPole-v1"': _cartpole_eval,
    'task="wbnb_deposit")\nobs, info = env.reset(seed=7)': _evm_wrap,
    'make_agent("expert", env)': _web_expert,
    'gym.make("Lynn/Coordination-v0"': _coordination,
    "train_lm(TrainConfig(": _lm,
    "al.run(updates=20)": _actor_learner,
}

# What the README itself must show: one example per env and per Echo wrapper (issue 28 item 5).
README_KEYS = (
    "print(lynn.ENV_IDS)",
    'gym.make("Lynn/EVMQuest-v0"',
    '"Lynn/LiveWeb-v0"',
    '"Lynn/WebWorldModel-v0"',
    'gym.make("Lynn/Coordination-v0"',
    "EchoVectorEnv(",
    "ActorLearner(",
)


def test_readme_has_an_example_per_env_and_wrapper() -> None:
    for key in README_KEYS:
        assert any(key in code for code in README_BLOCKS), f"no README block holds {key!r}"


def test_every_checker_has_its_block() -> None:
    for key in CHECKERS:
        where = [f"{page} block {i}" for page, i, code in BLOCKS if key in code]
        assert len(where) == 1, f"{key!r} must be in exactly one block of README.md and docs/*.md: {where}"


@pytest.mark.parametrize(
    "code", [code for *_, code in BLOCKS], ids=[f"{page}:block{i}" for page, i, _ in BLOCKS]
)
def test_readme_python_block_runs(code: str) -> None:
    proc = run_python(code, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    checkers = [fn for key, fn in CHECKERS.items() if key in code]
    if not checkers:
        assert proc.stdout.strip() == "", f"this block prints; add a checker of its output:\n{proc.stdout}"
        return
    checkers[0](proc.stdout, code)
