"""Every ```python block of the README runs as written (in a fresh interpreter) and prints what it
says it prints: each block that prints has a checker here, picked by a line of the block, that
parses its output and asserts the values (a block that prints and has no checker fails)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, run_python

BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), flags=re.S)


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


def _liveweb_expert(out: str, code: str) -> None:
    assert out.strip() and not out.startswith("reward"), out  # the goal comes first
    rewards = re.findall(r"^reward ([\d.]+)$", out, flags=re.M)
    assert rewards and float(rewards[-1]) == 1.0, out  # the expert solves the task


def _coordination(out: str, code: str) -> None:
    m = re.fullmatch(r"success rate ([\d.]+), (\d+)% of the oracle\s*", out)
    assert m, out
    assert 0.85 <= float(m.group(1)) <= 1.0 and 90 <= int(m.group(2)) <= 105


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
    'make_agent("expert", env)': _liveweb_expert,
    'gym.make("Lynn/Coordination-v0"': _coordination,
    "train_lm(TrainConfig(": _lm,
}


def test_readme_has_examples() -> None:
    assert BLOCKS


def test_every_checker_has_its_block() -> None:
    for key in CHECKERS:
        assert sum(key in b for b in BLOCKS) == 1, f"no single README block holds {key!r}"


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs(code: str) -> None:
    proc = run_python(code, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    checkers = [fn for key, fn in CHECKERS.items() if key in code]
    if not checkers:
        assert proc.stdout.strip() == "", f"this block prints; add a checker of its output:\n{proc.stdout}"
        return
    checkers[0](proc.stdout, code)
