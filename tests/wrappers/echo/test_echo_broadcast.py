from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lynn.wrappers.echo.broadcast import chain_time, one_to_many_time, simulate_broadcast


@settings(max_examples=50, deadline=None)
@given(
    n=st.integers(1, 64),
    model=st.floats(1e3, 1e9),
    bandwidth=st.floats(1e5, 1e10),
    chunks=st.integers(1, 64),
    latency=st.floats(0, 0.1),
)
def test_simulator_reproduces_the_closed_forms(n, model, bandwidth, chunks, latency) -> None:
    chunk = model / chunks
    assert simulate_broadcast("one_to_many", n, model, bandwidth, chunk, latency) == pytest.approx(
        one_to_many_time(n, model, bandwidth, latency), rel=1e-6
    )
    assert simulate_broadcast("chain", n, model, bandwidth, chunk, latency) == pytest.approx(
        chain_time(n, model, bandwidth, chunk, latency), rel=1e-6
    )


def test_chain_keeps_the_learner_uplink_off_the_critical_path_at_scale() -> None:
    m, b, c = 1e9, 1e9, 1e7
    assert simulate_broadcast("one_to_many", 256, m, b, c) == pytest.approx(256.0)
    assert simulate_broadcast("chain", 256, m, b, c) == pytest.approx(1.0 + 255 * 0.01)


def test_a_slow_relay_slows_everyone_behind_it() -> None:
    fast = simulate_broadcast("chain", 4, 1e6, [1e6] * 5, 1e5)
    slow = simulate_broadcast("chain", 4, 1e6, [1e6, 1e6, 2.5e5, 1e6, 1e6], 1e5)
    assert slow > fast + 2.0  # worker 2's uplink relays the whole model at a quarter of the rate
    with pytest.raises(ValueError, match="bandwidths"):
        simulate_broadcast("chain", 4, 1e6, [1e6] * 3, 1e5)
