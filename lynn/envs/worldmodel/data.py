"""World-model data: ``lynn collect`` transitions of ``Lynn/LiveWeb-v0`` and the held-out sets.

A transition record (one JSON line of ``transitions.jsonl``, written by :mod:`lynn.eval.collect`) has
``task_id``, ``split``, ``episode``, ``step``, ``goal``, ``obs`` and ``next_obs`` (``url``, ``title``,
``axtree``, ``open_pages``, ``last_action``, ``last_action_error``), ``action``, ``reward``, ``done``.

**Held-out sets** for measuring a world model:

- *held-out instances*: transitions of **test** task instances (the LiveWeb task file's split) whose
  template is not held out;
- *held-out templates*: every transition (train and test split) of the templates in
  :data:`HELDOUT_TEMPLATES` — eight whole templates (pages and intents the model never trained on),
  chosen by hand to cover the three sites and both task kinds. Models measured on these sets train on
  the train split **minus** these templates (:func:`training_split`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: Whole templates carved out of training for the held-out-templates evaluation.
HELDOUT_TEMPLATES = (
    "shop.product_sku",
    "shop.category_cheapest",
    "shop.add_to_wishlist",
    "forum.post_author",
    "forum.comment",
    "admin.customer_email",
    "admin.set_stock",
    "admin.orders_filtered",
)


def template_of(task_id: str) -> str:
    """``shop.product_price.3`` -> ``shop.product_price``; a salted draw's id too (``shop.product_price.3@val1``:
    ``lynn.envs.liveweb.tasks.generate`` ends salted ids in ``@salt``)."""
    head, _, tail = task_id.split("@", 1)[0].rpartition(".")
    return head if tail.isdigit() else task_id


def transition_files(data: str | Path) -> list[Path]:
    """``transitions*.jsonl`` in a folder (recursively), or the file itself."""
    p = Path(data)
    if p.is_file():
        return [p]
    if not p.exists():
        raise FileNotFoundError(
            f"no transitions at {p}; record some with `lynn collect Lynn/LiveWeb-v0 --out {p}`"
        )
    files = sorted(p.rglob("transitions*.jsonl"))
    if not files:
        raise FileNotFoundError(
            f"no transitions*.jsonl under {p}; record some with `lynn collect Lynn/LiveWeb-v0 --out {p}`"
        )
    return files


def read_transitions(*data: str | Path) -> list[dict[str, Any]]:
    """Every transition record of the given files/folders, in file order."""
    rows: list[dict[str, Any]] = []
    for d in data:
        for f in transition_files(d):
            with f.open(encoding="utf-8") as fh:
                rows += [json.loads(line) for line in fh if line.strip()]
    return rows


def training_split(
    rows: Iterable[dict[str, Any]], heldout: Iterable[str] = HELDOUT_TEMPLATES
) -> list[dict[str, Any]]:
    """Train-split transitions outside the held-out templates."""
    out = set(heldout)
    return [r for r in rows if r.get("split") == "train" and template_of(r["task_id"]) not in out]


def heldout_sets(
    rows: Iterable[dict[str, Any]], heldout: Iterable[str] = HELDOUT_TEMPLATES
) -> dict[str, list[dict[str, Any]]]:
    """``{"instances": test transitions of kept templates, "templates": all transitions of held-out templates}``."""
    out = set(heldout)
    rows = list(rows)
    return {
        "instances": [r for r in rows if r.get("split") == "test" and template_of(r["task_id"]) not in out],
        "templates": [r for r in rows if template_of(r["task_id"]) in out],
    }


def episodes(rows: Iterable[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Transitions grouped by episode (``task_id``, ``seed``, ``episode``), steps in order."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["task_id"], r.get("seed"), r.get("episode")), []).append(r)
    return [sorted(g, key=lambda r: r["step"]) for g in groups.values()]


def start_pages(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One real start page per task instance (the first step's observation): ``task_id``, ``split``,
    ``goal``, ``obs``; the first recorded episode of each instance wins."""
    seen: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r.get("step") == 0 and r["task_id"] not in seen:
            seen[r["task_id"]] = {
                "task_id": r["task_id"],
                "split": r.get("split"),
                "goal": r.get("goal", ""),
                "obs": r["obs"],
            }
    return list(seen.values())
