"""Task banks in WebArena's JSON format: the bundled one and users' own files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BUNDLED = Path(__file__).with_name("liveweb_tasks.json")
REQUIRED = ("task_id", "intent", "eval")


def load_tasks(source: str | Path | list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Load and check a task list: the bundled bank (``None``), a JSON file (a list, or one task object),
    or a list of dicts.

    Raises:
        ValueError: a task misses ``task_id``/``intent``/``eval`` or two tasks share an id.
    """
    if source is None:
        source = BUNDLED
    if isinstance(source, str | Path):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"task file {path} not found; pass tasks= a WebArena-format JSON file")
        data = json.loads(path.read_text(encoding="utf-8"))
    else:
        data = source
    if isinstance(data, dict):
        data = [data]
    tasks, seen = [], set()
    for i, raw in enumerate(data):
        if not isinstance(raw, dict):
            raise ValueError(f"task #{i} is not a JSON object")
        missing = [k for k in REQUIRED if k not in raw]
        if missing:
            raise ValueError(f"task #{i} ({raw.get('task_id', '?')}) misses {missing}")
        task = dict(raw)
        task["task_id"] = str(task["task_id"])
        if task["task_id"] in seen:
            raise ValueError(f"duplicate task_id {task['task_id']!r}")
        seen.add(task["task_id"])
        task.setdefault("sites", [])
        task.setdefault("start_url", "")
        task.setdefault("split", "train")
        task.setdefault("login", {})
        tasks.append(task)
    return tasks
