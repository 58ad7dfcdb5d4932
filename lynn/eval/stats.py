"""Small statistics for results: mean and the half-width of a 95% confidence interval."""

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
