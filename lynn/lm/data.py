"""The chat-format demonstration schema shared by every env, and its reader/writer.

One JSON object per line (``demos.jsonl``)::

    {"messages": [{"role": "system", "content": "..."},
                  {"role": "user", "content": "..."},
                  {"role": "assistant", "content": "..."}],
     "env_id": "Lynn/EVMQuest-v0", "task_id": "wbnb_deposit", "seed": 100007,
     "split": "train", "step": 0, "source": "oracle", "success": true}

``messages`` is what a model sees and says at one env step (rendered by :mod:`lynn.lm.prompts`);
the other keys say where it came from. ``split`` is decided by the env's own rule, never by the
collector: for EVMQuest an instance is held out (``test``) when its reset seed is below
:data:`EVM_TEST_SEEDS` — ``lynn eval`` seeds episodes ``seed + i`` from 0, so evaluation runs on
held-out instances — and ``train`` otherwise; LiveWeb uses its task file's train/test split.
Training refuses a ``test`` record (:func:`read_demos` with ``split="train"`` drops nothing silently:
it raises).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DEMOS_FILE = "demos.jsonl"
#: EVMQuest instances reset with a seed below this are the held-out test set.
EVM_TEST_SEEDS = 100_000
ROLES = ("system", "user", "assistant")


def evm_instance_split(seed: int) -> str:
    """``"test"`` for held-out EVMQuest instances (seed < :data:`EVM_TEST_SEEDS`), else ``"train"``."""
    return "test" if int(seed) < EVM_TEST_SEEDS else "train"


@dataclass
class Demo:
    """One demonstration: the chat at one env step plus its provenance."""

    messages: list[dict[str, str]]
    env_id: str
    task_id: str
    seed: int
    split: str
    step: int = 0
    source: str = ""
    success: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.messages or self.messages[-1].get("role") != "assistant":
            raise ValueError("a demonstration's messages must end with the assistant's reply")
        for m in self.messages:
            if m.get("role") not in ROLES or not isinstance(m.get("content"), str):
                raise ValueError(f"bad message {m!r}: need role in {ROLES} and string content")
        if self.split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {self.split!r}")

    def to_json(self) -> str:
        d = asdict(self)
        if not d["extra"]:
            del d["extra"]
        return json.dumps(d, ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> Demo:
        return cls(**json.loads(line))


def write_demos(path: str | Path, demos: Iterable[Demo], append: bool = True) -> int:
    """Append (or write) demonstrations as JSONL; returns how many were written."""
    path = Path(path)
    if path.is_dir() or not path.suffix:
        path.mkdir(parents=True, exist_ok=True)
        path = path / DEMOS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("a" if append else "w", encoding="utf-8") as fh:
        for d in demos:
            fh.write(d.to_json() + "\n")
            n += 1
    return n


def demo_files(data: str | Path) -> list[Path]:
    """Every ``*.jsonl`` demonstration file under ``data`` (a file or a folder, searched recursively)."""
    data = Path(data)
    if data.is_file():
        return [data]
    if not data.is_dir():
        raise FileNotFoundError(
            f"no demonstration data at {data}; make some with `lynn collect ENV --out {data}`"
        )
    files = sorted(p for p in data.rglob("*.jsonl") if p.name.startswith("demos"))
    if not files:
        raise FileNotFoundError(
            f"no demos*.jsonl under {data}; make some with `lynn collect ENV --out {data}`"
        )
    return files


def iter_demos(data: str | Path) -> Iterator[Demo]:
    for path in demo_files(data):
        with path.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield Demo.from_json(line)
                except (json.JSONDecodeError, TypeError, ValueError) as exc:
                    raise ValueError(f"{path}:{i}: not a demonstration record ({exc})") from exc


def read_demos(data: str | Path, split: str | None = "train", only_success: bool = False) -> list[Demo]:
    """Load demonstrations.

    Args:
        data: a JSONL file or a folder of ``demos*.jsonl``.
        split: ``"train"`` (for training: a ``test`` record is an error, so held-out instances can never
            leak into a model), ``"test"``, or ``None`` for everything.
        only_success: keep only steps of successful episodes (where ``success`` is recorded).
    """
    out = []
    for d in iter_demos(data):
        if split == "train" and d.split != "train":
            raise ValueError(
                f"{d.env_id} {d.task_id} seed {d.seed} is a held-out ({d.split}) instance; "
                "training data must hold train instances only (collect with --split train)"
            )
        if split is not None and d.split != split:
            continue
        if only_success and d.success is False:
            continue
        out.append(d)
    return out


def synth_evm_demos(tasks: Iterable[str], seeds: Iterable[int], profile: str = "bsc") -> Iterator[Demo]:
    """The oracle's first-step demonstrations of EVMQuest tasks, drawn without starting a chain.

    An EVMQuest reset draws the instance (parameters, then the instruction's template) from the env's
    ``np_random`` seeded with the reset seed, before it touches the chain; an atomic task's oracle script
    is a function of those parameters and the profile's contract names alone
    (:func:`lynn.envs.evmquest.spec.oracle_steps` with the reset's state unused). This replays exactly that
    draw, so a record equals the one ``lynn collect --agent oracle`` writes for the same task and seed
    (``tests/lm/test_data.py`` compares them byte for byte) at a few milliseconds instead of seconds: a
    cheap way to many seeds per task. Only step 0 of atomic tasks: a composite task's later steps read
    the chain, so they are collected. ``success`` is None: the script was not run.

    Args:
        tasks: atomic task ids.
        seeds: reset seeds (train instances only: ``>= EVM_TEST_SEEDS``).
        profile: the env's ``profile``.
    """
    from gymnasium.utils import seeding

    from lynn.envs.evmquest import noise
    from lynn.envs.evmquest.spec import instantiate, load_specs, oracle_steps
    from lynn.envs.evmquest.world import AGENT, FRIEND, PROFILES, role_names
    from lynn.lm.prompts import EVMQUEST, evm_reply, render

    specs = load_specs()
    prof = PROFILES[profile]
    names = role_names(prof)
    globals_ = {"native": prof.native, "wrapped": prof.wrapped, "dex": prof.dex}
    accounts = {"agent": AGENT.address, "friend": FRIEND.address}
    seeds = list(seeds)
    for task_id in tasks:
        spec = specs[task_id]
        if spec.split != "atomic":
            raise ValueError(f"{task_id} is a {spec.split} task: only atomic tasks are drawn without a chain")
        for seed in seeds:
            if evm_instance_split(seed) != "train":
                raise ValueError(f"seed {seed} is a held-out instance (< {EVM_TEST_SEEDS})")
            rng, _ = seeding.np_random(int(seed))
            inst = instantiate(spec, rng, AGENT.address, names, globals_, accounts)
            inst.scoring = "default"
            inst.params["hidden"] = noise.draw(task_id, rng)
            obs = {
                "instruction": inst.instruction,
                "agent_address": AGENT.address,
                "contracts": dict.fromkeys(names.values(), ""),
                "step": 0,
                "last_result": "",
            }
            script = oracle_steps(inst, names, {})[0]
            yield Demo(
                messages=[*render(EVMQUEST, obs), {"role": "assistant", "content": evm_reply(script)}],
                env_id=EVMQUEST,
                task_id=task_id,
                seed=int(seed),
                split="train",
                step=0,
                source="oracle-synth",
                success=None,
            )
