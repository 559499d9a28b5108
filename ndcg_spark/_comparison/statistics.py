"""The paired t-test of ``compare``: Student's t from the regularized incomplete beta function;
and the multiple-testing corrections of ``compare_models`` (Holm, Bonferroni).

Pure Python on the few summary numbers per (segment, k); nothing per user.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

CORRECTIONS = ("holm", "bonferroni")


def paired_t_test(n: int, mean: Optional[float], std: Optional[float]) -> Dict[str, Optional[float]]:
    """Two-sided paired t-test and the 95% interval of the mean difference."""
    empty = {"difference_ci_low": None, "difference_ci_high": None, "t_statistic": None, "p_value": None}
    if n is None or n < 2 or mean is None or std is None or math.isnan(std):
        return empty
    df = n - 1
    se = std / math.sqrt(n)
    half = student_t_quantile(0.975, df) * se
    if se == 0.0:
        p = 1.0 if mean == 0.0 else 0.0
        t = None if mean == 0.0 else math.copysign(math.inf, mean)
    else:
        t = mean / se
        p = 2.0 * student_t_sf(abs(t), df)
    return {"difference_ci_low": mean - half, "difference_ci_high": mean + half, "t_statistic": t, "p_value": p}


def with_t_test(record: Dict[str, Any], n: str) -> Dict[str, Any]:
    """A collected summary row with its paired t-test: the 95% interval of ``mean_difference``
    over ``record[n]`` pairs (its spread ``std_difference``), the t statistic and the p-value."""
    record.update(paired_t_test(record[n], record["mean_difference"], record["std_difference"]))
    return record


def student_t_sf(t: float, df: int) -> float:
    """P(T > t) for t >= 0 under Student's t with ``df`` degrees of freedom."""
    x = df / (df + t * t)
    return 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, x)


def student_t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t, by bisection on the survival function."""
    lo, hi = 0.0, 1.0
    while student_t_sf(hi, df) > 1.0 - p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if student_t_sf(mid, df) > 1.0 - p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) by its continued fraction (modified Lentz), accurate to ~1e-15."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - regularized_incomplete_beta(b, a, 1.0 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-16:
            break
    return math.exp(log_front) * f / a


def adjust_p_values(p_values: Sequence[Optional[float]], method: str = "holm") -> List[Optional[float]]:
    """The family's p-values corrected for testing them together, in their order.

    ``"bonferroni"``: min(1, m p). ``"holm"`` (step-down): the i-th smallest becomes
    min(1, max over j <= i of (m - j + 1) p_(j)), as statsmodels' ``multipletests``. A missing
    p-value (a test that could not be run) stays missing and is not counted in m.

    Examples
    --------
    >>> adjust_p_values([0.01, 0.04, None, 0.03])
    [0.03, 0.06, None, 0.06]
    >>> adjust_p_values([0.01, 0.04, 0.03], "bonferroni")
    [0.03, 0.12, 0.09]
    """
    if method not in CORRECTIONS:
        raise ValueError(f"correction = {method!r} is not one of {', '.join(CORRECTIONS)}")
    present = [i for i, p in enumerate(p_values) if p is not None]
    m = len(present)
    adjusted: List[Optional[float]] = [None] * len(p_values)
    if method == "bonferroni":
        for i in present:
            adjusted[i] = min(1.0, m * p_values[i])
        return adjusted
    running = 0.0
    for rank, i in enumerate(sorted(present, key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
