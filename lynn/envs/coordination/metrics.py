"""Stream metrics of the routing benchmark: rolling success, shock recovery time, regret growth."""

from __future__ import annotations

import numpy as np


def rolling_mean(x: np.ndarray, window: int = 50) -> np.ndarray:
    """Trailing mean: ``out[t] = mean(x[max(0, t - window + 1) : t + 1])`` (no look-ahead)."""
    x = np.asarray(x, dtype=float)
    c = np.concatenate([[0.0], np.cumsum(x)])
    t = np.arange(1, len(x) + 1)
    lo = np.maximum(0, t - window)
    return (c[t] - c[lo]) / (t - lo)


def recovery_time(
    success: np.ndarray,
    shock: int,
    *,
    window: int = 50,
    ratio: float = 0.9,
    hold: int = 50,
    baseline_window: int = 200,
) -> int | None:
    """Steps after ``shock`` until the rolling success is back to ``ratio`` x the pre-shock level, held.

    The pre-shock level is the mean success over the ``baseline_window`` steps before the shock; the
    recovery point is the first ``t >= shock`` from which the trailing ``window``-step success stays at
    or above the target for ``hold`` consecutive steps. A router whose rolling success never drops
    below the target recovers at 0.

    Returns:
        ``t - shock``, or ``None`` if it never recovers within the stream.
    """
    success = np.asarray(success, dtype=float)
    if shock <= 0 or shock >= len(success):
        raise ValueError(f"shock step {shock} must lie inside the stream of {len(success)} steps")
    target = ratio * success[max(0, shock - baseline_window) : shock].mean()
    ok = rolling_mean(success, window)[shock:] >= target
    # Length of the run of consecutive True values starting at each index, computed backwards.
    run = np.zeros(len(ok) + 1, dtype=np.int64)
    for i in range(len(ok) - 1, -1, -1):
        run[i] = run[i + 1] + 1 if ok[i] else 0
    hits = np.flatnonzero(run[:-1] >= hold)
    return int(hits[0]) if hits.size else None


def loglog_slope(cum_regret: np.ndarray, start: int = 100, points: int = 20) -> float:
    """Slope of ``log R(t)`` against ``log t`` on ``points`` log-spaced ``t`` from ``start`` to the end.

    1 means linear regret; a sublinear (learning) router has a slope below 1.
    """
    cum_regret = np.asarray(cum_regret, dtype=float)
    ts = np.unique(np.geomspace(start, len(cum_regret), points).astype(int))
    values = np.maximum(cum_regret[ts - 1], 1e-9)
    return float(np.polyfit(np.log(ts), np.log(values), 1)[0])
