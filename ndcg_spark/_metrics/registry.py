"""The metric registry: the declaration types, and the live registry of the beyond-accuracy metrics.

A metric is declared once, here or in a module that registers it (:mod:`ndcg_spark._metrics.beyond`
declares the built-in beyond-accuracy ones, :mod:`ndcg_spark._metrics.accuracy` NDCG's and the
companion metrics). Every consumer (the options' check of ``beyond_accuracy``, the inputs each
metric reads, the per-user SQL, the summary, the console, the MLflow metrics, the gates and
compare) reads :func:`per_user` / :func:`global_figures` when it runs, so a metric registered at
run time (:func:`register`, :func:`registered`) is picked up everywhere.

* :class:`Metric` (with :class:`Cut`): an accuracy metric, its per-user SQL from the hits;
* :class:`PerUser`: a beyond-accuracy metric of each user's list: what it reads, its SQL at a
  cutoff over the list's array of structs, how the summary aggregates it (:class:`Aggregation`),
  its direction;
* :class:`Global`: a beyond-accuracy figure of a whole segment and k (computed by
  :mod:`ndcg_spark._beyond.exposure`, by name).

This module never imports :mod:`ndcg_spark.options` (the options import these names); the
declaring modules import it for type checking only.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Collection, Dict, FrozenSet, Iterator, Optional, Tuple, Union

#: The evaluation options (:class:`ndcg_spark.options.EvaluationOptions`), which import this module:
#: named, not imported, even for type checking (the package's import graph has no cycle, tests/test_layout.py).
EvaluationOptions = Any


# ----------------------------------------------------------------------------- accuracy


@dataclass(frozen=True)
class Cut:
    """SQL for what a companion metric reads at one cutoff.

    ``hits``: how many hits within the cutoff (double); ``precisions``: the sum of the precisions
    at those hits, added in position order; ``first``: the position of the first hit, null when
    none is within the cutoff; ``relevant``: the user's relevant judged items as a double, null
    when none; ``cut``: the cutoff.
    """

    hits: str
    precisions: str
    first: str
    relevant: str
    cut: str


@dataclass(frozen=True)
class Metric:
    """One accuracy metric: ``name`` its per-user column, ``summary`` its mean's column (None: not
    averaged), ``header`` its console header, ``sql`` its per-user SQL at a cutoff (None: summed by
    scoring)."""

    name: str
    summary: Optional[str]
    header: str
    sql: Optional[Callable[[Cut], str]] = None


# ----------------------------------------------------------------------------- beyond accuracy

#: What a beyond-accuracy metric may read (:attr:`PerUser.reads`): the optional tables, or an items
#: table with its category / features column set.
INPUTS = ("interactions", "items", "baseline_recommendations", "item_category_col", "item_features_col")

#: What of the list's structs and of its row a per-user metric's SQL reads (:attr:`PerUser.parts`),
#: so the stage computes only those: ``popularity`` (``x.pop``, interaction rows), ``head``
#: (``x.h``), ``self_information`` (``x.si``), ``surprisal_weight`` (``x.sw``), ``category``
#: (``x.c``), ``features`` (``x.f``, normalised), ``relevance`` (``x.r``, judged), ``history``
#: (``HISTORY``, ``HISTORY_SIZE``, ``HISTORY_CATS``, ``HISTORY_VECTOR``), ``pair_sums`` and
#: ``serendipity_sums`` (the co-occurrence sums). Every struct has ``x.p`` (position) and ``x.i``
#: (item); ``BASELINE`` is on the row whenever a baseline is read.
PARTS = (
    "popularity",
    "head",
    "self_information",
    "surprisal_weight",
    "category",
    "features",
    "relevance",
    "history",
    "pair_sums",
    "serendipity_sums",
)


def _nothing(opts: EvaluationOptions) -> Tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class Aggregation:
    """How the summary aggregates a per-user metric per segment and k, over the users with a value:
    ``mean(column, opts)``, the SQL aggregate of ``mean_<name>``; ``interval``, whether its normal
    95% interval (``<name>_ci_low`` / ``<name>_ci_high``) follows (else both are null)."""

    name: str
    mean: Callable[[str, EvaluationOptions], str]
    interval: bool = True


#: The summary's default: the mean over the users with a value, with its normal 95% interval.
MEAN = Aggregation("mean", lambda column, opts: f"avg({column})")


def _mean(opts: EvaluationOptions) -> Aggregation:
    return MEAN


@dataclass(frozen=True)
class PerUser:
    """A beyond-accuracy metric of each user's list (``per_user`` column ``name``, ``mean_<name>``
    in the summary).

    ``reads(opts)``: the inputs it needs, of :data:`INPUTS` (a run without one leaves it out, or
    stops when it is named). ``sql(top, k, opts)``: its SQL at cutoff ``k`` over ``top`` (the
    list's array of structs within k) and the row's columns (:mod:`ndcg_spark._metrics.per_user_sql`);
    null where it has no value. ``parts(opts)``: what of the structs and row it reads, of
    :data:`PARTS`. ``aggregation(opts)``: how the summary aggregates it (:data:`MEAN` by default).
    ``higher_is_better``: its direction; a lower-is-better figure is never gated (a floor or an
    allowed drop on it would pass the worse run); ``measures`` words what it measures for that refusal.
    """

    name: str
    reads: Callable[[EvaluationOptions], Tuple[str, ...]]
    sql: Callable[[str, Optional[int], EvaluationOptions], str]
    parts: Callable[[EvaluationOptions], Tuple[str, ...]] = _nothing
    aggregation: Callable[[EvaluationOptions], Aggregation] = _mean
    higher_is_better: bool = True
    measures: str = ""


@dataclass(frozen=True)
class Global:
    """A beyond-accuracy figure of a whole segment and k (its own summary column ``name``), computed
    by :func:`ndcg_spark._beyond.exposure.global_figures`. ``reads``, ``higher_is_better`` and
    ``measures`` as :class:`PerUser`'s."""

    name: str
    reads: Callable[[EvaluationOptions], Tuple[str, ...]] = _nothing
    higher_is_better: bool = True
    measures: str = ""


Declaration = Union[PerUser, Global]

# ----------------------------------------------------------------------------- the live registry

_DECLARED: Dict[str, Declaration] = {}


def register(metric: Declaration) -> None:
    """Declare ``metric`` for every consumer from now on (after those declared before it).

    Raises
    ------
    ValueError
        A name declared already.
    """
    if metric.name in _DECLARED:
        raise ValueError(f"beyond-accuracy metric {metric.name!r} is declared already")
    _DECLARED[metric.name] = metric


def unregister(name: str) -> None:
    """Forget the metric ``name`` (a test's, or a plugin's)."""
    del _DECLARED[name]


@contextmanager
def registered(*metrics: Declaration) -> Iterator[None]:
    """``metrics`` declared while the block runs, forgotten after it."""
    done = []
    try:
        for metric in metrics:
            register(metric)
            done.append(metric.name)
        yield
    finally:
        for name in done:
            unregister(name)


def per_user() -> Tuple[PerUser, ...]:
    """The per-user beyond-accuracy metrics declared, in declaration order (every output's order)."""
    return tuple(m for m in _DECLARED.values() if isinstance(m, PerUser))


def global_figures() -> Tuple[Global, ...]:
    """The global beyond-accuracy figures declared, in declaration order."""
    return tuple(m for m in _DECLARED.values() if isinstance(m, Global))


def per_user_names() -> Tuple[str, ...]:
    return tuple(m.name for m in per_user())


def global_names() -> Tuple[str, ...]:
    return tuple(m.name for m in global_figures())


def names() -> Tuple[str, ...]:
    """Every beyond-accuracy metric's name: the per-user ones, then the global ones."""
    return per_user_names() + global_names()


def declared(name: str) -> Declaration:
    """The declaration of ``name`` (KeyError for an unknown one)."""
    return _DECLARED[name]


def parts(names: Collection[str], opts: EvaluationOptions) -> FrozenSet[str]:
    """What the per-user metrics of ``names`` read of the lists' structs and rows (:data:`PARTS`)."""
    return frozenset(p for m in per_user() if m.name in names for p in m.parts(opts))
