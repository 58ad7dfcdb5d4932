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
