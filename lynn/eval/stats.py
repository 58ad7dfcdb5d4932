"""Small statistics for results: mean with a 95% confidence interval, and proportion intervals for rates."""

from __future__ import annotations

import math
from collections.abc import Sequence

# Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom (no scipy dependency).
_T975 = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
]  # fmt: skip


def t_quantile_975(dof: int) -> float:
    """t_{0.975, dof}; the normal 1.96 beyond 30 degrees of freedom."""
    if dof < 1:
        return math.nan
    return _T975[dof - 1] if dof <= len(_T975) else 1.96


def mean_ci95(values: Sequence[float]) -> tuple[float, float]:
    """Mean and 95% CI half-width (Student's t); the half-width is 0 for fewer than 2 values."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, t_quantile_975(n - 1) * math.sqrt(var / n)


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% by default): ``(low, high)`` within [0, 1].

    Unlike mean ± t·s/√n it is never empty for 0/n or n/n (0/10 gives 0–27.8%) and never leaves
    [0, 1] (8/10 gives 49.0–94.3%). ``(nan, nan)`` for ``n == 0``.
    """
    if n <= 0:
        return math.nan, math.nan
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, {n}], got {successes}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Exact ends where the rate is 0 or 1 (floating point leaves 1e-17 there).
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high
