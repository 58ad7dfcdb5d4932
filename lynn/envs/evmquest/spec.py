"""Task data of Lynn/EVMQuest-v0: loading the JSON task files and instantiating them.

A task file (``tasks/<task_id>.json``) holds ``task_id``, ``split`` (atomic/composite),
``category``, ``description``, ``templates`` (≥ 3 instructions with ``{param}`` slots),
``params`` (generation rules, below), ``mutant`` (how the validity test breaks the oracle) and,
for composites, ``steps`` and ``optimal_steps``.

Parameter rules: ``{"rule": "uniform", "low", "high", "decimals"}``, ``{"rule": "int", "low",
"high"}``, ``{"rule": "choice", "values": [...]}``, ``{"rule": "token", "values": [roles]}``
(rendered as the profile's symbol), ``{"rule": "fresh_address"}``, ``{"rule": "agent"}``,
``{"rule": "account", "values": ["agent", "friend"]}``,
``{"rule": "fixed", "value": ...}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

TASK_DIR = Path(__file__).resolve().parent / "tasks"
SPLITS = ("atomic", "composite", "all")


@dataclass(frozen=True)
class TaskSpec:
    """One task as written in its data file."""

    task_id: str
    split: str
    category: str
    description: str
    templates: tuple[str, ...]
    params: dict[str, dict[str, Any]]
    mutant: dict[str, Any]
    steps: tuple[str, ...] = ()
    optimal_steps: int = 1

    @property
    def max_steps(self) -> int:
        return 3 if self.split == "atomic" else 2 * self.optimal_steps


@dataclass
class TaskInstance:
    """A task with its parameters drawn: what one episode is about."""

    spec: TaskSpec
    params: dict[str, Any]
    instruction: str
    template_index: int
    display: dict[str, str] = field(default_factory=dict)

    @property
    def task_id(self) -> str:
        return self.spec.task_id


@cache
def load_specs() -> dict[str, TaskSpec]:
    """Every task file, by id (sorted: atomic first, then composite)."""
    specs = {}
    for path in sorted(TASK_DIR.glob("*.json")):
        raw = json.loads(path.read_text())
        spec = TaskSpec(
            task_id=raw["task_id"],
            split=raw["split"],
            category=raw["category"],
            description=raw["description"],
            templates=tuple(raw["templates"]),
            params=raw.get("params", {}),
            mutant=raw.get("mutant", {}),
            steps=tuple(raw.get("steps", ())),
            optimal_steps=int(raw.get("optimal_steps", 1)),
        )
        if spec.task_id != path.stem:
            raise ValueError(f"{path}: task_id {spec.task_id!r} does not match the file name")
        specs[spec.task_id] = spec
    return dict(sorted(specs.items(), key=lambda kv: (kv[1].split != "atomic", kv[0])))


def _fresh_address(rng: np.random.Generator) -> str:
    from eth_utils import to_checksum_address

    return to_checksum_address("0x" + bytes(rng.integers(0, 256, size=20, dtype=np.uint8)).hex())


def draw_param(rule: dict[str, Any], rng: np.random.Generator, accounts: dict[str, str]) -> Any:
    """One parameter value from its rule (JSON-able: decimals are strings)."""
    kind = rule["rule"]
    if kind == "uniform":
        decimals = int(rule.get("decimals", 3))
        value = rng.uniform(float(rule["low"]), float(rule["high"]))
        quantum = Decimal(1).scaleb(-decimals)
        text = str(Decimal(repr(value)).quantize(quantum))
        return text if Decimal(text) > 0 else str(quantum)
    if kind == "int":
        return int(rng.integers(int(rule["low"]), int(rule["high"]) + 1))
    if kind in ("choice", "token"):
        values = rule["values"]
        return values[int(rng.integers(len(values)))]
    if kind == "fresh_address":
        return _fresh_address(rng)
    if kind == "agent":
        return accounts["agent"]
    if kind == "account":
        values = rule["values"]
        return accounts[values[int(rng.integers(len(values)))]]
    if kind == "fixed":
        return rule["value"]
    raise ValueError(f"unknown parameter rule {kind!r}")


def instantiate(
    spec: TaskSpec,
    rng: np.random.Generator,
    agent: str,
    names: dict[str, str],
    globals_: dict[str, str],
    accounts: dict[str, str] | None = None,
) -> TaskInstance:
    """Draw parameters and render one template (``names``: role -> symbol; ``accounts``: label -> address)."""
    accounts = {"agent": agent, **(accounts or {})}
    params = {name: draw_param(rule, rng, accounts) for name, rule in spec.params.items()}
    display = dict(globals_)
    for name, value in params.items():
        rule = spec.params[name]
        if rule["rule"] == "token" or (isinstance(value, str) and value in names):
            display[name] = names[value]
        elif isinstance(value, list):
            display[name] = " -> ".join(names.get(v, str(v)) for v in value)
        else:
            display[name] = str(value)
    # Derived slots: a swap path's ends, and the display name of a pool or pair role.
    if isinstance(params.get("path"), list):
        display["path_in"] = names[params["path"][0]]
        display["path_out"] = names[params["path"][-1]]
    for slot in ("pool", "pair"):
        if isinstance(params.get(slot), str) and params[slot] in names:
            display[f"{slot}_name"] = names[params[slot]]
    index = int(rng.integers(len(spec.templates)))
    instruction = spec.templates[index].format(**display)
    return TaskInstance(
        spec=spec, params=params, instruction=instruction, template_index=index, display=display
    )


def mutate(instance: TaskInstance, rng: np.random.Generator) -> dict[str, Any]:
    """Parameters broken as the task's ``mutant`` rule says (for the validity tests)."""
    rule = instance.spec.mutant
    params = dict(instance.params)
    op = rule.get("op")
    name = rule.get("param")
    if op == "scale":
        params[name] = str(Decimal(str(params[name])) * Decimal(str(rule.get("factor", 2))))
    elif op == "scale_all":
        for key in [k for k in params if k.startswith("amount")]:
            params[key] = str(Decimal(str(params[key])) * Decimal(str(rule.get("factor", 2))))
    elif op == "add":
        params[name] = params[name] + int(rule.get("delta", 1))
    elif op == "fresh_address":
        params[name] = _fresh_address(rng)
    elif op == "set":
        params[name] = rule["value"]
    elif op == "swap_token":
        values = [v for v in instance.spec.params[name]["values"] if v != params[name]] or [rule["value"]]
        params[name] = rule.get("value", values[0])
    return params


MUTANT_WRAPPERS = {
    # A query answered wrongly: every number changed, every string altered, booleans flipped.
    "wrong_answer": """

def _corrupt(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value * 2 + 7
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return [_corrupt(v) for v in value]
    if isinstance(value, dict):
        return {k: _corrupt(v) for k, v in value.items()}
    return value


_oracle_skill = execute_skill


def execute_skill(w3, agent_address, contracts):
    return {"query_result": _corrupt(_oracle_skill(w3, agent_address, contracts)["query_result"])}
""",
    # The right call sent to the wrong contract (the agent's own address).
    "wrong_target": """

_oracle_skill = execute_skill


def execute_skill(w3, agent_address, contracts):
    tx = _oracle_skill(w3, agent_address, contracts)
    tx["to"] = agent_address
    return tx
""",
}


def mutant_script(instance: TaskInstance, names: dict[str, str], rng: np.random.Generator) -> str:
    """A broken solution of ``instance`` (its task's ``mutant`` rule); it must not pass."""
    from lynn.envs.evmquest.logic import LOGIC

    logic = LOGIC[instance.task_id]
    op = instance.spec.mutant.get("op")
    if op in MUTANT_WRAPPERS:
        return logic.script(instance.params, names) + MUTANT_WRAPPERS[op]
    return logic.script(mutate(instance, rng), names)


def oracle_steps(instance: TaskInstance, names: dict[str, str], before: dict[str, Any]) -> list[str]:
    """The oracle's scripts for ``instance``: one for an atomic task, one per step for a composite."""
    from lynn.envs.evmquest.logic import LOGIC

    logic = LOGIC[instance.task_id]
    if logic.steps is None:
        return [logic.script(instance.params, names)]
    return logic.steps(instance.params, names, before)


def mutant_steps(
    instance: TaskInstance, names: dict[str, str], before: dict[str, Any], rng: np.random.Generator
) -> list[str]:
    """A broken solution (atomic or composite) of ``instance``; it must not pass."""
    from lynn.envs.evmquest.logic import LOGIC

    logic = LOGIC[instance.task_id]
    if logic.steps is None:
        return [mutant_script(instance, names, rng)]
    rule = instance.spec.mutant
    op = rule.get("op")
    scripts = logic.steps(instance.params, names, before)
    if op == "wrong_answer":
        return [s + MUTANT_WRAPPERS["wrong_answer"] if '"query_result"' in s else s for s in scripts]
    if op == "drop_step":
        return [s for i, s in enumerate(scripts) if i != int(rule["index"])]
    if op == "drop_steps":
        return [s for i, s in enumerate(scripts) if i not in set(rule["indices"])]
    return logic.steps(mutate(instance, rng), names, before)
