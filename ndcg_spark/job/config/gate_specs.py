"""The job's gates: one model for its three kinds, one parser for their spelling, one check.

A gate is written ``[column=value:][metric@]k:amount[,...]``. The optional filter (``model=v2``, or
``model=v2&country=kr``) selects the rows it holds, ``k`` is a cutoff computed (``all`` for the
whole list), the optional metric a beyond-accuracy figure the run computes (NDCG without one:
``catalog_coverage@10:0.2``, ``model=v2:novelty@10:0.5``) and ``amount`` depends on the kind:

=========  ==================  ==============================================================
kind       flag                amount
=========  ==================  ==============================================================
floor      ``--fail-below``    the lowest mean NDCG allowed
drop       ``--fail-if-drop``  the largest fall from the last run (``0.02``, or ``2%`` of it)
worse      ``--fail-if-worse`` the margin a candidate may trail its baseline by
=========  ==================  ==============================================================

Which figures each kind may hold (:func:`gated`, from the metrics' declared direction): a floor,
any figure but ``gini_index``; a drop, NDCG and the per-user means (it pairs users); a margin,
NDCG. ``gini_index`` measures concentration, lower is better (so declared): a floor or an allowed
drop on it would pass the worse run, so it is refused (gate ``catalog_coverage`` or
``distributional_coverage``, which rise as exposure spreads). NDCG's amounts lie in [0, 1]; a beyond-accuracy figure's may be any number >= 0
(novelty and distributional coverage are bits, popularity a count).

The config parses each gate once (:func:`parse_gates`); :func:`ndcg_spark.job.gates.holding.check`
holds gates against the few rows the driver already holds and :mod:`ndcg_spark.job.gates.wording`
words what it found.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ndcg_spark.errors import ConfigError
from ndcg_spark.options import (
    Cutoff,
    beyond_global,
    beyond_metric_names,
    beyond_per_user,
    higher_is_better,
    k_label,
    measured_by,
    parse_cutoff,
)

#: Columns of compare's rows a ``--fail-if-worse`` filter may name besides the segments.
MODEL_COLUMNS = ("baseline_model", "candidate_model")

#: What the regression gate compares with: the most recent earlier complete run, or the most
#: recent earlier one whose gates all passed.
DROP_BASELINES = ("last", "last_passed")


#: The figure a gate holds when its spelling names none.
NDCG = "ndcg"


def gated(kind: str) -> Tuple[str, ...]:
    """The figures a kind of gate may hold, as the metrics are declared now: a floor, NDCG and each
    higher-is-better beyond-accuracy figure; a drop, NDCG and each higher-is-better per-user metric;
    a margin, NDCG (see the module's text: gini_index is lower-is-better)."""
    per_user = tuple(n for n in beyond_per_user() if higher_is_better(n))
    global_ = tuple(n for n in beyond_global() if higher_is_better(n))
    return {"floor": (NDCG, *per_user, *global_), "drop": (NDCG, *per_user), "worse": (NDCG,)}[kind]


def summary_column(metric: str) -> str:
    """The summary column a floor on ``metric`` reads: ``mean_ndcg``, ``mean_<name>`` of a per-user
    metric, the global figure's own name."""
    return metric if metric in beyond_global() else f"mean_{metric}"


def figure_label(metric: str) -> str:
    """How a gate's line names its figure: ``mean NDCG``, ``mean novelty``, ``catalog_coverage``."""
    if metric == NDCG:
        return "mean NDCG"
    return metric if metric in beyond_global() else f"mean {metric}"


@dataclass(frozen=True)
class Kind:
    """How one kind of gate is spelled: its key, the word for its amount, whether ``2%`` is allowed."""

    key: str
    amount: str
    example: str
    relative: bool = False
    columns: Tuple[str, ...] = ()
    #: How an unknown filter column is refused (``{known}``: the columns allowed).
    unknown: str = "is not a column to filter on ({known})"


KINDS = {
    "floor": Kind("fail_below", "threshold", "10:0.25 or model=v2:10:0.25", unknown="is not a group_by column"),
    "drop": Kind("fail_if_drop", "drop", "10:0.02, 10:2% or model=v2:10:0.02", relative=True),
    "worse": Kind("fail_if_worse", "margin", "10:0.01 or model=v2:10:0.01", columns=MODEL_COLUMNS),
}


@dataclass(frozen=True)
class Gate:
    """One gate as written.

    Attributes
    ----------
    kind : {"floor", "drop", "worse"}
        ``--fail-below``, ``--fail-if-drop`` or ``--fail-if-worse``.
    where : tuple of (str, str)
        (column, value) pairs a row must match, its value read as text; empty for every row.
    k : int or None
        The cutoff (None for the whole list).
    amount : float
        The floor, the drop or the margin: an NDCG figure, or a share of the earlier mean when
        ``relative``.
    relative : bool
        Whether ``amount`` was written as a percentage (``2%`` is 0.02 of the earlier mean).
    metric : str
        The figure held: ``ndcg``, or a beyond-accuracy one (:func:`gated`).
    """

    kind: str
    where: Tuple[Tuple[str, str], ...]
    k: Cutoff
    amount: float
    relative: bool = False
    metric: str = field(default=NDCG, repr=False)

    def selects(self, row: Mapping[str, Any]) -> bool:
        """Whether ``row`` (a summary, change or comparison row) is one this gate holds: its k,
        and each filtered column's value, as text, the one given (a null value never matches)."""
        return row.get("k") == self.k and all(row.get(c) is not None and str(row[c]) == v for c, v in self.where)

    def threshold(self, earlier_mean: Optional[float]) -> Optional[float]:
        """The amount as an NDCG figure (a relative amount scaled by the earlier mean)."""
        if not self.relative:
            return self.amount
        return None if earlier_mean is None else self.amount * earlier_mean

    def describe(self) -> str:
        """The gate as written, e.g. ``model=v2:10:2%`` or ``catalog_coverage@10:0.2``."""
        amount = f"{self.amount * 100:g}%" if self.relative else f"{self.amount:g}"
        where = "&".join(f"{c}={v}" for c, v in self.where)
        metric = "" if self.metric == NDCG else f"{self.metric}@"
        return (f"{where}:" if where else "") + f"{metric}{k_label(self.k)}:{amount}"

    @property
    def label(self) -> str:
        """The figure as a line names it (:func:`figure_label`)."""
        return figure_label(self.metric)


def parse_gates(
    kind: str,
    spec: Any,
    group_by: Sequence[str] = (),
    cutoffs: Optional[Sequence[Cutoff]] = None,
    computed: Optional[Sequence[str]] = None,
) -> Tuple[Gate, ...]:
    """Parse ``[column=value:][metric@]k:amount[,...]`` (a string, or a list of such strings from TOML).

    Parameters
    ----------
    kind : {"floor", "drop", "worse"}
        Which flag the gates were written for (:data:`KINDS`).
    spec : str or list of str
        The gates as written; empty or None for none.
    group_by : sequence of str
        The segment columns a filter may name (and, for ``worse``, the model columns).
    cutoffs : sequence of int or None, optional
        The cutoffs computed; a gate on another k is refused. Not checked when omitted.
    computed : sequence of str, optional
        The beyond-accuracy metrics the run computes; a gate on another is refused. Not checked
        when omitted.

    Returns
    -------
    tuple of Gate

    Raises
    ------
    ConfigError
        One line naming the bad gate and the expected spelling.

    Examples
    --------
    >>> parse_gates("drop", "10:0.02,model=v2:all:2%", ["model"])[1]
    Gate(kind='drop', where=(('model', 'v2'),), k=None, amount=0.02, relative=True)
    >>> parse_gates("floor", "catalog_coverage@10:0.2")[0].describe()
    'catalog_coverage@10:0.2'
    """
    spelling = KINDS[kind]
    if spec is None or spec == "" or spec == []:
        return ()
    parts = spec if isinstance(spec, (list, tuple)) else str(spec).split(",")
    expected = f"expected [column=value:]k:{spelling.amount}, e.g. {spelling.example}"
    allowed = [*group_by, *spelling.columns]
    gates = []
    for part in parts:
        fields = str(part).strip().rsplit(":", 2)
        where = fields.pop(0) if len(fields) == 3 else ""
        k_text, amount_text = fields if len(fields) == 2 else ("", "")
        metric, _, k_text = k_text.strip().rpartition("@")
        metric = _metric(metric.strip() or NDCG, kind, spelling, computed)
        k, (amount, relative) = _cutoff(k_text), _amount(amount_text, spelling.relative, bounded=metric == NDCG)
        if k == -1 or amount is None:
            raise ConfigError(f"{spelling.key} = {part!r}: {expected}")
        if cutoffs is not None and k not in cutoffs:
            raise ConfigError(f"{spelling.key} names k = {k_text.strip()}, which is not among the cutoffs computed")
        gates.append(Gate(kind, _segment_filter(where, spelling, allowed), k, amount, relative, metric))
    return tuple(gates)


def _metric(metric: str, kind: str, spelling: Kind, computed: Optional[Sequence[str]]) -> str:
    """The figure a gate names, refused in one line when its kind cannot hold it or the run does not compute it."""
    if metric not in (NDCG, *beyond_metric_names()):
        raise ConfigError(
            f"{spelling.key} names {metric!r}, not a figure to gate (ndcg, or one of {', '.join(gated('floor')[1:])})"
        )
    if metric != NDCG and not higher_is_better(metric):
        # Declared lower-is-better (gini_index): no kind may hold it.
        measures = measured_by(metric)
        rising = " or ".join(n for n in beyond_global() if higher_is_better(n))
        raise ConfigError(
            f"{spelling.key} cannot hold {metric}: {f'it measures {measures} ' if measures else ''}(lower is better), "
            f"so a floor or an allowed drop on it would pass the worse run; gate {rising}"
        )
    if metric not in gated(kind):
        why = (
            "it pairs users, and " + metric + " is a figure of the whole catalog" if kind == "drop" else "it holds NDCG"
        )
        raise ConfigError(f"{spelling.key} cannot hold {metric}: {why}")
    if metric != NDCG and computed is not None and metric not in computed:
        raise ConfigError(
            f"{spelling.key} names {metric}, which this run does not compute (set beyond_accuracy and give its input)"
        )
    return metric


def _cutoff(text: str) -> Cutoff:
    """A cutoff as written (``10``, ``all``; :func:`~ndcg_spark.options.parse_cutoff`), or -1."""
    try:
        return parse_cutoff(text.strip()) if text.strip() else -1
    except ConfigError:
        return -1


def _amount(text: str, relative: bool, bounded: bool = True) -> Tuple[Optional[float], bool]:
    """(amount, is relative): ``0.02`` or ``2%`` (0.02 relative); None when neither or out of range
    ([0, 1] when ``bounded`` or relative, else any finite number >= 0)."""
    text = text.strip()
    is_relative = text.endswith("%")
    if is_relative and not relative:
        return None, False
    try:
        value = float(text[:-1] if is_relative else text)
    except ValueError:
        return None, False
    value = value / 100.0 if is_relative else value
    if math.isnan(value) or value < 0.0 or ((bounded or is_relative) and value > 1.0) or math.isinf(value):
        return None, False
    return value, is_relative


def _segment_filter(where: str, spelling: Kind, allowed: Sequence[str]) -> Tuple[Tuple[str, str], ...]:
    """``model=v2&country=kr`` as (column, value) pairs, each column one of ``allowed``."""
    pairs = []
    for condition in filter(None, (c.strip() for c in where.split("&"))):
        column, sep, value = condition.partition("=")
        if not sep or not column.strip():
            raise ConfigError(f"{spelling.key} segment {condition!r} must look like column=value")
        if column.strip() not in allowed:
            known = ", ".join(allowed) or "none"
            unknown = spelling.unknown.format(known=known)
            raise ConfigError(f"{spelling.key} segment {condition!r}: {column.strip()} {unknown}")
        pairs.append((column.strip(), value.strip()))
    return tuple(pairs)


@dataclass(frozen=True)
class DropGates:
    """The regression gate as asked for: ``--fail-if-drop`` with ``--drop-on-estimate`` and
    ``--drop-baseline``.

    Attributes
    ----------
    spec : str
        The gates as written (``10:0.02,model=v2:10:2%``).
    gates : tuple of Gate
        The parsed gates (kind ``drop``).
    on_estimate : bool
        Fail on the mean difference alone, whatever its interval.
    baseline : {"last", "last_passed"}
        The earlier run compared with (see :data:`DROP_BASELINES`).
    """

    spec: str
    gates: Tuple[Gate, ...]
    on_estimate: bool = False
    baseline: str = "last"

    @classmethod
    def parse(
        cls, spec: Any, on_estimate: bool, baseline: Any, group_by: Sequence[str], cutoffs: Sequence[Cutoff],
        partitioned: bool, computed: Optional[Sequence[str]] = None,
    ) -> Optional[DropGates]:  # fmt: skip
        """The gates of ``fail_if_drop`` (None when not asked for).

        The switches are checked whether or not a gate is asked for; a gate needs the run to own a
        partition (``partitioned``): the runs it compares are the partitions of one output.

        Examples
        --------
        >>> DropGates.parse("10:2%", False, "last", (), [10], True).gates
        (Gate(kind='drop', where=(), k=10, amount=0.02, relative=True),)
        """
        baseline = "last" if baseline is None else baseline
        if baseline not in DROP_BASELINES:
            raise ConfigError(f"drop_baseline = {baseline!r} is not one of {', '.join(DROP_BASELINES)}")
        gates = parse_gates("drop", spec, group_by, cutoffs, computed)
        if not gates:
            return None
        if not partitioned:
            raise ConfigError(
                "fail_if_drop compares a run with the previous run of the same output: give --run-date "
                "(or --partition key=value)"
            )
        text = ",".join(spec) if isinstance(spec, (list, tuple)) else str(spec)
        return cls(text, gates, bool(on_estimate), baseline)


def margins_by_k(gates: Sequence[Gate]) -> Dict[Cutoff, List[float]]:
    """{k: the gates' margins at k}, as compare's report draws them on its difference charts."""
    margins: Dict[Cutoff, List[float]] = {}
    for gate in gates:
        margins.setdefault(gate.k, []).append(gate.amount)
    return margins
