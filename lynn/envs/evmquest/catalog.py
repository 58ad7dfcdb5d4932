"""Every task of Lynn/EVMQuest-v0 by id: the atomic and composite tables joined (``LOGIC``).

Both tables are written with :mod:`~lynn.envs.evmquest.taskkit` and import nothing back, so
any of the three modules may be imported first.

One task's parts live in up to three tables: its default logic (set-up, checks, Python oracle)
in :mod:`~lynn.envs.evmquest.atomic` or :mod:`~lynn.envs.evmquest.composites`, its port of the
reference validator (``scoring="reference"``) in :mod:`~lynn.envs.evmquest.reference`, and its
TypeScript oracle in :mod:`~lynn.envs.evmquest.ts_oracle`. :func:`task_parts` gathers them,
with where each is written; from a shell::

    python -m lynn.envs.evmquest.catalog wbnb_deposit
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from lynn.envs.evmquest.atomic import ATOMIC
from lynn.envs.evmquest.composites import COMPOSITES
from lynn.envs.evmquest.taskkit import TaskLogic

if TYPE_CHECKING:
    from lynn.envs.evmquest.reference import RefTask
    from lynn.envs.evmquest.ts_oracle import Plan, TsRow

LOGIC: dict[str, TaskLogic] = {**ATOMIC, **COMPOSITES}


@dataclass(frozen=True)
class TaskParts:
    """Everything that defines one task, and where each part is written.

    Attributes:
        task_id: the task's id.
        kind: ``"atomic"`` or ``"composite"`` (which table holds its logic).
        logic: the default profile's behaviour: ``setup``, ``measure``, ``checks``, and the
            Python oracle (``script``; composites: ``steps``).
        reference: the ported reference validator of an atomic task, or None (composites are
            scored by the reference's general composite rules; atomic tasks not yet ported keep
            the default checks, see :func:`~lynn.envs.evmquest.reference.is_ported`).
        reference_oracle: the oracle's script under ``scoring="reference"`` where the reference
            asks for another call or answer than the default oracle gives, else None.
        ts_oracle: the TypeScript oracle's row (atomic) or plan (composite), or None where it
            does not cover the task yet.
        locations: part name -> ``"path:line"`` (path relative to the repository) for each part
            present: ``logic`` (the table row), ``setup`` (only when not the no-op default),
            ``checks``, ``oracle``, ``reference``, ``reference_setup`` (the reference's atomic
            preconditions or a composite's pre-set allowances), ``reference_oracle``, ``ts_oracle``.
    """

    task_id: str
    kind: str
    logic: TaskLogic
    reference: RefTask | None
    reference_oracle: Callable[[dict[str, Any], dict[str, str]], str] | None
    ts_oracle: TsRow | Plan | None
    locations: dict[str, str]


def _root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _where(obj: Any) -> str:
    """``path:line`` of a function, lambda or class (``?`` when the source cannot be found)."""
    try:
        path = inspect.getsourcefile(obj) or "?"
        line = inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return "?"
    return f"{os.path.relpath(path, _root())}:{line}"


def _row(module: Any, task_id: str, fallback: str, after: str = "") -> str:
    """``path:line`` of the first quoted ``task_id`` in ``module``'s source (its table row).

    ``after``: start looking below the first line that starts with this text (a table's name).
    """
    try:
        source, _ = inspect.getsourcelines(module)
    except (OSError, TypeError):
        return fallback
    started = not after
    for number, text in enumerate(source, start=1):
        started = started or text.startswith(after)
        if started and f'"{task_id}"' in text:
            return f"{os.path.relpath(inspect.getsourcefile(module) or '?', _root())}:{number}"
    return fallback


def task_parts(task_id: str) -> TaskParts:
    """One task's set-up, checks and oracles from every table, with their source locations.

    Raises:
        KeyError: ``task_id`` is not a task of the catalog (the message lists how to find them).
    """
    # The reference and TypeScript tables are only needed here: imported on demand.
    from lynn.envs.evmquest import atomic, composites, reference, ts_oracle

    if task_id not in LOGIC:
        raise KeyError(
            f"unknown EVMQuest task {task_id!r}; `lynn tasks Lynn/EVMQuest-v0` lists the "
            f"{len(LOGIC)} task ids (e.g. {', '.join(sorted(LOGIC)[:3])})"
        )
    logic = LOGIC[task_id]
    kind = "atomic" if task_id in ATOMIC else "composite"
    ref = reference.ATOMIC.get(task_id)
    ref_oracle = reference.ORACLE_OVERRIDES.get(task_id)
    ts: TsRow | Plan | None = ts_oracle.TS_ROWS.get(task_id) or ts_oracle.TS_COMPOSITES.get(task_id)

    checks_at = _where(logic.checks)
    locations = {"logic": _row(atomic if kind == "atomic" else composites, task_id, checks_at)}
    default_setup = {f.name: f.default for f in fields(TaskLogic)}["setup"]
    if logic.setup is not default_setup and not _is_noop(logic.setup):
        locations["setup"] = _where(logic.setup)
    locations["checks"] = checks_at
    locations["oracle"] = _where(logic.steps if logic.steps is not None else logic.script)
    if ref is not None:
        locations["reference"] = _row(reference, task_id, _where(ref.checks))
    for table in ("ATOMIC_SETUP", "PRE_APPROVALS"):
        if task_id in getattr(reference, table):
            locations["reference_setup"] = _row(reference, task_id, "?", after=table)
    if ref_oracle is not None:
        locations["reference_oracle"] = _where(ref_oracle)
    if ts is not None:
        locations["ts_oracle"] = _row(ts_oracle, task_id, "?")
    return TaskParts(task_id, kind, logic, ref, ref_oracle, ts, locations)


def _is_noop(fn: Callable[..., Any]) -> bool:
    """A ``lambda w, p: None`` written in place of the default (composites' ``setup or ...``)."""
    code = getattr(fn, "__code__", None)
    return (
        code is not None
        and code.co_name == "<lambda>"
        and code.co_code == (lambda w, p: None).__code__.co_code
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m lynn.envs.evmquest.catalog TASK_ID...``: print where each part of a task lives."""
    from lynn.envs.evmquest import reference

    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(f"usage: python -m lynn.envs.evmquest.catalog TASK_ID...  ({len(LOGIC)} tasks)")
        return 0 if args else 2
    for task_id in args:
        try:
            parts = task_parts(task_id)
        except KeyError as e:
            print(e.args[0], file=sys.stderr)
            return 2
        print(f"{task_id} ({parts.kind})")
        for part, where in parts.locations.items():
            print(f"  {part:<17} {where}")
        for part, present in (
            ("reference", parts.reference is not None),
            ("ts_oracle", parts.ts_oracle is not None),
        ):
            if not present:
                why = "not covered yet"
                if part == "reference" and parts.kind == "atomic":
                    why = "not ported: default checks under the reference's attempts"
                elif part == "reference":
                    optimal, rounds = reference.composite_steps(task_id)
                    why = f"the reference's composite rules: optimal {optimal} steps, {rounds} rounds"
                print(f"  {part:<17} - ({why})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
