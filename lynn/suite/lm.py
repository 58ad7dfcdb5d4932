"""``lynn suite --train``: the suite trains its own LM instead of evaluating the zoo's.

By default ``make run`` puts the zoo's LMs (``zoo:evm-lm``, ``zoo:web-lm``; :mod:`lynn.zoo`) on the
leaderboard as agent ``lm``. With ``--train`` the suite collects demonstrations from the privileged
agents (EVMQuest oracle on train seeds of every atomic task; LiveWeb expert on every 4th train task) and
trains a ``base`` target for a fixed number of steps (:data:`EPOCHS` epochs of that data, seed 0: the same
weights every time; a ``minutes`` cap is reported when it binds), cached in :data:`DEFAULT_DIR`. Pass
``lynn suite --lm-model DIR`` to put another model on the leaderboard instead.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path("build") / "suite-lm"
EPOCHS = 6
EVM_SEEDS = list(range(100_000, 100_008))
WEB_STRIDE = 4


def ensure_suite_model(
    path: str | Path = DEFAULT_DIR,
    minutes: float | None = None,
    progress: bool = True,
    with_web: bool = True,
) -> str:
    """The model folder, trained first if it is not there (prints what it does and how long it took).

    Training is :data:`EPOCHS` epochs (a fixed step count for this data); ``minutes`` only caps it.
    """
    from lynn.eval.collect import CollectConfig, collect
    from lynn.eval.runner import list_tasks
    from lynn.lm.train import TrainConfig, train_lm

    path = Path(path)
    if (path / "config.json").exists():
        return str(path)
    started = time.monotonic()
    data = path.parent / f"{path.name}-data"
    stamp = data / "collected.json"
    if not stamp.exists():
        if data.exists():  # an interrupted collection: start it over rather than train on part of it
            for f in data.glob("*.jsonl"):
                f.unlink()
        print(f"lynn suite: no LM at {path}; collecting demonstrations into {data} …", flush=True)
        counts: dict[str, Any] = {}
        counts["evm"] = collect(
            CollectConfig(
                "Lynn/EVMQuest-v0", split="atomic", seeds=EVM_SEEDS, out=str(data / "evm"), progress=progress
            )
        )
        if with_web:
            tasks = [t["task_id"] for t in list_tasks("Lynn/LiveWeb-v0", "train")][::WEB_STRIDE]
            counts["web"] = collect(
                CollectConfig(
                    "Lynn/LiveWeb-v0", split="train", tasks=tasks, out=str(data / "web"), progress=progress
                )
            )
        stamp.write_text(json.dumps(counts))
    cap = f", capped at {minutes:g} min" if minutes else ""
    print(f"lynn suite: training the suite LM ({EPOCHS} epochs, seed 0{cap}) …", flush=True)
    summary = train_lm(
        TrainConfig(
            data=str(data),
            out=str(path),
            size="base",
            epochs=EPOCHS,
            seed=0,
            max_minutes=minutes,
            lr=1e-3,
            progress=progress,
        )
    )
    print(
        f"lynn suite: suite LM ready in {(time.monotonic() - started) / 60:.1f} min "
        f"({summary['parameters'] / 1e6:.1f}M params, {summary['epochs_done']:.1f} epochs, final loss {summary['final_loss']:.3f})",
        flush=True,
    )
    return str(path)
