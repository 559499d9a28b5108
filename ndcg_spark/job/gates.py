"""Gates on change: the spelling of ``--fail-if-drop`` and ``--fail-if-worse``, and the
non-inferiority decision of ``compare`` over its result rows.

Every gate is written ``[column=value:]k:amount[,...]``, where the optional filter
(``model=v2``, or ``model=v2&country=kr``) selects the segments it holds, ``k`` is a cutoff
computed (``all`` for the whole list) and ``amount`` is a threshold of NDCG (``--fail-below``),
an absolute difference of NDCG (``0.02``) or, where allowed, a share of the earlier figure
(``2%``). The job's config parses each gate here, once; everything here works on the few
summary rows the driver already holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ndcg_spark.errors import ConfigError
from ndcg_spark.options import WHOLE_LIST, Cutoff, EvaluationOptions, k_label

#: Columns of compare's rows a ``--fail-if-worse`` filter may name besides the segments.
MODEL_COLUMNS = ("baseline_model", "candidate_model")


@dataclass(frozen=True)
class ChangeGate:
    """One parsed gate.

    Attributes
    ----------
    where : tuple of (str, str)
        (column, value) pairs a row must match, its value read as text; empty for every row.
    k : int or None
        The cutoff (None for the whole list).
    amount : float
        The drop or margin: an NDCG difference, or a share of the earlier mean when ``relative``.
    relative : bool
        Whether ``amount`` was written as a percentage (``2%`` is 0.02 of the earlier mean).
    """

    where: Tuple[Tuple[str, str], ...]
    k: Cutoff
    amount: float
    relative: bool = False

    def selects(self, row: Dict[str, Any]) -> bool:
        """Whether ``row`` (a summary or comparison row) is one this gate holds."""
        return row["k"] == self.k and all(row.get(c) is not None and str(row[c]) == v for c, v in self.where)

    def threshold(self, earlier_mean: Optional[float]) -> Optional[float]:
        """The amount as an NDCG difference (a relative amount scaled by the earlier mean)."""
        if not self.relative:
            return self.amount
        return None if earlier_mean is None else self.amount * earlier_mean

    def describe(self) -> str:
        """The gate as written, e.g. ``model=v2:10:2%``."""
        amount = f"{self.amount * 100:g}%" if self.relative else f"{self.amount:g}"
        where = "&".join(f"{c}={v}" for c, v in self.where)
        return (f"{where}:" if where else "") + f"{k_label(self.k)}:{amount}"


def parse_change_gates(
    spec: Any,
    name: str,
    group_by: Sequence[str] = (),
    cutoffs: Optional[Sequence[Cutoff]] = None,
    *,
    relative: bool = True,
    columns: Sequence[str] = (),
) -> List[ChangeGate]:
    """Parse ``[column=value:]k:amount[,...]`` (a string, or a list of such strings from TOML).

    Parameters
    ----------
    spec : str or list of str
        The gates as written; empty or None for none.
    name : str
        The key as the user wrote it (``fail_if_drop``), named in errors.
    group_by : sequence of str
        The segment columns a filter may name.
    cutoffs : sequence of int or None, optional
        The cutoffs computed; a gate on another k is refused. Not checked when omitted.
    relative : bool
        Whether ``2%`` (a share of the earlier mean) is allowed beside an absolute amount.
    columns : sequence of str
        Further columns a filter may name (compare's model names).

    Returns
    -------
    list of ChangeGate

    Raises
    ------
    ConfigError
        One line naming the bad gate and the expected spelling.

    Examples
    --------
    >>> parse_change_gates("10:0.02,model=v2:all:2%", "fail_if_drop", ["model"])[1]
    ChangeGate(where=(('model', 'v2'),), k=None, amount=0.02, relative=True)
    """
    if spec is None or spec == "" or spec == []:
        return []
    parts = spec if isinstance(spec, (list, tuple)) else str(spec).split(",")
    example = "10:0.02, 10:2% or model=v2:10:0.02" if relative else "10:0.01 or model=v2:10:0.01"
    expected = f"expected [column=value:]k:{'drop' if relative else 'margin'}, e.g. {example}"
    gates = []
    for part in parts:
        fields = str(part).strip().rsplit(":", 2)
        where = fields.pop(0) if len(fields) == 3 else ""
        k_text, amount_text = fields if len(fields) == 2 else ("", "")
        k, amount, is_relative = _cutoff(k_text), *_amount(amount_text, relative)
        if k == -1 or amount is None:
            raise ConfigError(f"{name} = {part!r}: {expected}")
        if cutoffs is not None and k not in cutoffs:
            raise ConfigError(f"{name} names k = {k_text.strip()}, which is not among the cutoffs computed")
        gates.append(ChangeGate(_segment_filter(where, name, [*group_by, *columns]), k, amount, is_relative))
    return gates


def _cutoff(text: str) -> Cutoff:
    """A cutoff as written (``10``, ``all``), or -1 when it is not one."""
    text = text.strip()
    if text.lower() == WHOLE_LIST:
        return None
    return int(text) if text.isdigit() and int(text) > 0 else -1


def _amount(text: str, relative: bool) -> Tuple[Optional[float], bool]:
    """(amount, is relative): ``0.02`` or ``2%`` (0.02 relative); None when neither or out of range."""
    text = text.strip()
    is_relative = text.endswith("%")
    if is_relative and not relative:
        return None, False
    try:
        value = float(text[:-1] if is_relative else text)
    except ValueError:
        return None, False
    value = value / 100.0 if is_relative else value
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        return None, False
    return value, is_relative


def _segment_filter(
    where: str, name: str, allowed: Sequence[str], unknown: str = "is not a column to filter on ({known})"
) -> Tuple[Tuple[str, str], ...]:
    """``model=v2&country=kr`` as (column, value) pairs, each column one of ``allowed``."""
    pairs = []
    for condition in filter(None, (c.strip() for c in where.split("&"))):
        column, sep, value = condition.partition("=")
        if not sep or not column.strip():
            raise ConfigError(f"{name} segment {condition!r} must look like column=value")
        if column.strip() not in allowed:
            known = ", ".join(allowed) or "none"
            raise ConfigError(f"{name} segment {condition!r}: {column.strip()} {unknown.format(known=known)}")
        pairs.append((column.strip(), value.strip()))
    return tuple(pairs)


def segment_text(row: Dict[str, Any], columns: Sequence[str]) -> str:
    """``model=v2, country=kr`` for the row's segment columns (empty without segments)."""
    return ", ".join(f"{c}={row.get(c)}" for c in columns)


# ----------------------------------------------------------------------------- gates of ndcg-spark


@dataclass(frozen=True)
class Gate:
    """A quality gate (``--fail-below``): mean NDCG@``k`` of the segments matching ``where`` must
    reach ``threshold``.

    ``where`` is (column, value) pairs, each column a ``group_by`` column; empty holds every segment.
    """

    where: Tuple[Tuple[str, str], ...]
    k: Cutoff
    threshold: float

    @classmethod
    def parse_all(cls, text: Optional[str], options: EvaluationOptions) -> Tuple[Gate, ...]:
        """``fail_below`` ("10:0.25,5:0.2", "model=v2:10:0.25") as gates, checked against the options.

        Examples
        --------
        >>> Gate.parse_all("model=v2:10:0.25", EvaluationOptions(k=[10], group_by=["model"]))
        (Gate(where=(('model', 'v2'),), k=10, threshold=0.25),)
        """
        from ndcg_spark.job.flags import parse_cutoff

        if not text:
            return ()
        gates = []
        for part in str(text).split(","):
            fields = part.strip().rsplit(":", 2)
            where = fields.pop(0) if len(fields) == 3 else ""
            k_text, threshold = fields if len(fields) == 2 else ("", "")
            try:
                k = parse_cutoff(k_text)
                value = float(threshold)
            except (ConfigError, ValueError):
                k, value = -1, float("nan")
            if k == -1 or not 0.0 <= value <= 1.0:
                raise ConfigError(
                    f"fail_below = {text!r}: expected [column=value:]k:threshold, e.g. 10:0.25 or model=v2:10:0.25"
                )
            if k not in options.cutoffs:
                raise ConfigError(f"fail_below names k = {k_text.strip()}, which is not among the cutoffs computed")
            segments = _segment_filter(where, "fail_below", options.group_by, "is not a group_by column")
            gates.append(cls(segments, k, value))
        return tuple(gates)

    def selects(self, row: Dict[str, Any]) -> bool:
        """Whether a summary row is one this gate holds: its k, and its segment values as text."""
        return row["k"] == self.k and all(row[c] is not None and str(row[c]) == v for c, v in self.where)


#: What the regression gate compares with: the most recent earlier complete run, or the most
#: recent earlier one whose gates all passed.
DROP_BASELINES = ("last", "last_passed")


@dataclass(frozen=True)
class DropGates:
    """The regression gate as asked for: ``--fail-if-drop`` with ``--drop-on-estimate`` and
    ``--drop-baseline``.

    Attributes
    ----------
    spec : str
        The gates as written (``10:0.02,model=v2:10:2%``).
    gates : tuple of ChangeGate
        The parsed gates.
    on_estimate : bool
        Fail on the mean difference alone, whatever its interval.
    baseline : {"last", "last_passed"}
        The earlier run compared with (see :data:`DROP_BASELINES`).
    """

    spec: str
    gates: Tuple[ChangeGate, ...]
    on_estimate: bool = False
    baseline: str = "last"

    @classmethod
    def parse(
        cls, spec: Any, on_estimate: bool, baseline: Any, options: EvaluationOptions, partitioned: bool
    ) -> Optional[DropGates]:
        """The gates of ``fail_if_drop`` (None when not asked for), checked against the options.

        The switches are checked whether or not a gate is asked for; a gate needs the run to own a
        partition (``partitioned``): the runs it compares are the partitions of one output.

        Examples
        --------
        >>> DropGates.parse("10:2%", False, "last", EvaluationOptions(k=[10]), True).gates
        (ChangeGate(where=(), k=10, amount=0.02, relative=True),)
        """
        baseline = "last" if baseline is None else baseline
        if baseline not in DROP_BASELINES:
            raise ConfigError(f"drop_baseline = {baseline!r} is not one of {', '.join(DROP_BASELINES)}")
        gates = tuple(parse_change_gates(spec, "fail_if_drop", options.group_by, options.cutoffs))
        if not gates:
            return None
        if not partitioned:
            raise ConfigError(
                "fail_if_drop compares a run with the previous run of the same output: give --run-date "
                "(or --partition key=value)"
            )
        text = ",".join(spec) if isinstance(spec, (list, tuple)) else str(spec)
        return cls(text, gates, bool(on_estimate), baseline)


# ----------------------------------------------------------------------------- non-inferiority


def parse_worse_gates(
    spec: Any, group_by: Sequence[str] = (), cutoffs: Optional[Sequence[Cutoff]] = None
) -> List[ChangeGate]:
    """``--fail-if-worse [column=value:]k:margin[,...]``: absolute margins; a filter may name a
    segment column or ``baseline_model`` / ``candidate_model``."""
    return parse_change_gates(spec, "fail_if_worse", group_by, cutoffs, relative=False, columns=MODEL_COLUMNS)


def non_inferiority(
    rows: List[Dict[str, Any]], gates: Sequence[ChangeGate], group_by: Sequence[str] = ()
) -> List[Dict[str, Any]]:
    """Each ``--fail-if-worse`` gate held against every comparison row it selects.

    A candidate fails when it is worse than its baseline by more than the margin with 95%
    confidence: the upper end of the interval of the paired difference (candidate - baseline)
    lies below ``-margin``. A pair without an interval (fewer than two pairs of users) is not
    shown to be worse and passes; a gate that selects no row fails, so a typo in a filter
    cannot let a candidate through.

    Parameters
    ----------
    rows : list of dict
        Compare's result rows (``ModelComparison.report()``, or ``comparison`` of
        ``comparison.json``): segments, ``k``, ``mean_difference``, ``difference_ci_low``,
        ``difference_ci_high``, ``pairs`` and, for N models, ``baseline_model`` and ``candidate_model``.
    gates : sequence of ChangeGate
        From :func:`parse_worse_gates`.
    group_by : sequence of str
        The segment columns.

    Returns
    -------
    list of dict
        One record per (gate, row): ``segment``, ``k``, ``margin``, the model names, ``pairs``,
        ``mean_difference``, ``difference_ci_low``, ``difference_ci_high`` and ``passed``.
    """
    checked = []
    for gate in gates:
        selected = [r for r in rows if gate.selects(r)]
        for r in selected:
            high = r.get("difference_ci_high")
            checked.append(
                {
                    "gate": gate.describe(),
                    "segment": {c: r.get(c) for c in group_by},
                    "k": gate.k,
                    "margin": gate.amount,
                    "baseline_model": r.get("baseline_model"),
                    "candidate_model": r.get("candidate_model"),
                    "pairs": r.get("pairs"),
                    "mean_difference": r.get("mean_difference"),
                    "difference_ci_low": r.get("difference_ci_low"),
                    "difference_ci_high": high,
                    "passed": high is None or high >= -gate.amount,
                }
            )
        if not selected:
            checked.append(
                {
                    "gate": gate.describe(),
                    "segment": dict(gate.where),
                    "k": gate.k,
                    "margin": gate.amount,
                    "baseline_model": None,
                    "candidate_model": None,
                    "pairs": None,
                    "mean_difference": None,
                    "difference_ci_low": None,
                    "difference_ci_high": None,
                    "passed": False,
                }
            )
    return checked


def margins_by_k(gates: Sequence[ChangeGate]) -> Dict[Cutoff, List[float]]:
    """{k: the gates' margins at k}, as :func:`ndcg_spark._report_compare.render_comparison` draws them."""
    margins: Dict[Cutoff, List[float]] = {}
    for gate in gates:
        margins.setdefault(gate.k, []).append(gate.amount)
    return margins
