"""The catalog's one-place lookup of a task's parts (no chain needed: tables and source only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lynn.envs.evmquest import atomic, composites, reference, ts_oracle
from lynn.envs.evmquest.catalog import LOGIC, main, task_parts

ROOT = Path(__file__).resolve().parents[3]


def test_every_task_finds_its_logic_and_the_parts_each_table_has() -> None:
    assert set(LOGIC) == set(atomic.ATOMIC) | set(composites.COMPOSITES)
    for task_id in LOGIC:
        parts = task_parts(task_id)
        assert parts.logic is LOGIC[task_id]
        assert parts.kind == ("atomic" if task_id in atomic.ATOMIC else "composite")
        assert parts.reference is reference.ATOMIC.get(task_id)
        assert parts.reference_oracle is reference.ORACLE_OVERRIDES.get(task_id)
        assert parts.ts_oracle is (ts_oracle.TS_ROWS.get(task_id) or ts_oracle.TS_COMPOSITES.get(task_id))
        assert {"logic", "checks", "oracle"} <= set(parts.locations)
        for part in ("reference", "reference_oracle", "ts_oracle"):
            assert (part in parts.locations) == (getattr(parts, part) is not None), (task_id, part)
        has_ref_setup = task_id in reference.ATOMIC_SETUP or task_id in reference.PRE_APPROVALS
        assert ("reference_setup" in parts.locations) == has_ref_setup, task_id
        for part, where in parts.locations.items():
            path, line = where.rsplit(":", 1)
            source = (ROOT / path).read_text().splitlines()
            assert 1 <= int(line) <= len(source), (task_id, part, where)
            if part in ("reference", "reference_setup", "ts_oracle"):
                # a table row: the line names the task
                assert f'"{task_id}"' in source[int(line) - 1], (task_id, part, where)


@pytest.mark.parametrize(
    "table",
    [reference.ATOMIC, reference.ORACLE_OVERRIDES, reference.ATOMIC_SETUP, reference.PRE_APPROVALS,
     ts_oracle.TS_ROWS, ts_oracle.TS_COMPOSITES],
)  # fmt: skip
def test_every_table_row_is_a_catalog_task_the_lookup_reaches(table: dict[str, object]) -> None:
    """A row keyed by an id the catalog does not know would be a part no lookup finds."""
    assert set(table) <= set(LOGIC)
    assert table, "an empty table: was it renamed?"


def test_unknown_task_and_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KeyError, match="unknown EVMQuest task 'nope'.*lynn tasks"):
        task_parts("nope")
    assert main(["wbnb_deposit", "composite_full_liquidity_cycle"]) == 0
    out = capsys.readouterr().out
    assert "wbnb_deposit (atomic)" in out and "lynn/envs/evmquest/atomic.py:" in out
    assert "lynn/envs/evmquest/reference.py:" in out and "lynn/envs/evmquest/ts_oracle.py:" in out
    assert "composite_full_liquidity_cycle (composite)" in out and "not covered yet" in out
    assert main(["nope"]) == 2
