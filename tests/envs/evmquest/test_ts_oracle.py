"""The TypeScript oracle's table (no Bun needed: the scripts are text; test_typescript.py runs them)."""

from __future__ import annotations

import pytest

from lynn.envs.evmquest import ts_oracle


def test_oracle_table_covers_every_atomic_task() -> None:
    from lynn.envs.evmquest.evmquest_env import implemented_specs

    atomic = {s.task_id for s in implemented_specs("atomic")}
    assert atomic <= set(ts_oracle.TS_ROWS)
    assert ts_oracle.ts_oracle_covers("erc20_permit") and ts_oracle.ts_oracle_covers(
        "composite_wrap_unwrap_cycle"
    )
    assert not ts_oracle.ts_oracle_covers("composite_full_liquidity_cycle")
    with pytest.raises(KeyError, match="does not cover"):
        ts_oracle.ts_oracle_script("composite_wrap_unwrap_cycle", {}, {})
    with pytest.raises(KeyError, match="does not cover 'composite_full_liquidity_cycle'"):
        ts_oracle.ts_composite_scripts("composite_full_liquidity_cycle", {}, {})
