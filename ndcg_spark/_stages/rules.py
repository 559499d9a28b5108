"""The row rules: every way an input row can be at fault, each written once.

A :class:`RowRule` names a problem and holds a SQL predicate, true for a row at fault. The same
rules serve three uses:

* :func:`guard_rows` (``on_invalid_rows = "error"``, inside ``evaluate``): a ``raise_error`` in
  a filter over the input, so a bad row stops the run at no extra pass;
* ``ndcg_spark.validate``: one aggregation per table counts every problem, then up to five
  example keys are fetched for the problems found;
* :func:`split_rows` (``on_invalid_rows = "quarantine"``): the rows at fault, with a ``reason``
  column, and the rest.

Two rules look at a group of rows: two items at one rank in one list (:data:`RANK_TIE`) and a
(user, item) judged twice (:data:`REPEATED_JUDGEMENT`). Over rows they are window counts; inside
``evaluate`` the same rule is checked on the per-user lists, which are built anyway
(:func:`guard_lists`), so it costs no shuffle of its own. Both uses take the rule's words from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from pyspark.sql import DataFrame

from ndcg_spark._spark.sql import ident, string_literal
from ndcg_spark.errors import input_check
from ndcg_spark.options import EvaluationOptions, k_label

#: Relevance at or above this overflows 2^rel - 1 in a double.
MAX_EXPONENTIAL_RELEVANCE = 1024.0

#: The column of the quarantined rows that names their first problem.
REASON = "reason"

RANK_TIE = "rank_tie"
REPEATED_JUDGEMENT = "duplicate_relevance"


@dataclass(frozen=True)
class RowRule:
    """A row-level problem: ``sql`` is a SQL predicate, true for a row at fault (never null).

    ``by_group`` rules read a window over the row's group (its list, or its (user, item)).
    """

    name: str
    table: str
    column: str
    problem: str
    sql: str
    by_group: bool = False

    def message(self, count: Optional[int] = None, examples: Sequence[str] = ()) -> str:
        """The rule's words, e.g. ``relevance column 'relevance' is null in 2 rows, e.g. ...``."""
        if self.column.startswith("("):
            where = f"{self.table} key {self.column}"
        else:
            where = f"{self.table} column {self.column!r}"
        text = f"{where} {self.problem}"
        if count is not None:
            text += f" in {count} row{'s' if count != 1 else ''}"
        if examples:
            text += f", e.g. {', '.join(examples)}"
        return text


def _is_bad_number(value: str) -> str:
    return f"(isnan({value}) OR abs({value}) = CAST('Infinity' AS DOUBLE))"


def _rank_tie(opts: EvaluationOptions, list_keys: Sequence[str]) -> RowRule:
    user, rank = ident(opts.user_col), ident(opts.rank_col or "")
    by_list = ", ".join([*list_keys, user])
    return RowRule(
        RANK_TIE,
        "recommendations",
        opts.rank_col or "",
        "has two items at the same rank for one user",
        f"coalesce(count(1) OVER (PARTITION BY {by_list}, {rank}) > 1, false) "
        f"AND CAST({rank} AS DOUBLE) IS NOT NULL AND {user} IS NOT NULL",
        by_group=True,
    )


def _repeated_judgement(opts: EvaluationOptions) -> RowRule:
    user, item = ident(opts.user_col), ident(opts.item_col)
    return RowRule(
        REPEATED_JUDGEMENT,
        "relevance",
        f"({opts.user_col}, {opts.item_col})",
        'appears more than once (set duplicate_relevance = "max" to keep the largest)',
        f"coalesce(count(1) OVER (PARTITION BY {user}, {item}) > 1, false) AND {user} IS NOT NULL AND {item} IS NOT NULL",
        by_group=True,
    )


def recommendation_rules(opts: EvaluationOptions, segments: Sequence[str] = ()) -> List[RowRule]:
    """The rules of the recommendations; ``segments``: its segment columns (one list per segment and user)."""
    t = "recommendations"
    rules = [
        RowRule("null_user", t, opts.user_col, "is null", f"{ident(opts.user_col)} IS NULL"),
        RowRule("null_item", t, opts.item_col, "is null", f"{ident(opts.item_col)} IS NULL"),
    ]
    if opts.rank_col:
        rank = f"CAST({ident(opts.rank_col)} AS DOUBLE)"
        rules += [
            RowRule("null_rank", t, opts.rank_col, "is null", f"{rank} IS NULL"),
            RowRule(
                "bad_rank",
                t,
                opts.rank_col,
                "is not a positive integer",
                f"coalesce({_is_bad_number(rank)} OR {rank} < 1 OR {rank} != floor({rank}), false)",
            ),
            _rank_tie(opts, [ident(c) for c in segments]),
        ]
    else:
        score = f"CAST({ident(opts.score_col)} AS DOUBLE)"
        rules += [
            RowRule("null_score", t, opts.score_col, "is null", f"{score} IS NULL"),
            RowRule("bad_score", t, opts.score_col, "is NaN or infinite", f"coalesce({_is_bad_number(score)}, false)"),
        ]
    return rules


def relevance_rules(opts: EvaluationOptions) -> List[RowRule]:
    """The rules of the relevance table under these options."""
    t = "relevance"
    rel = f"CAST({ident(opts.relevance_col)} AS DOUBLE)"
    rules = [
        RowRule("null_user", t, opts.user_col, "is null", f"{ident(opts.user_col)} IS NULL"),
        RowRule("null_item", t, opts.item_col, "is null", f"{ident(opts.item_col)} IS NULL"),
        RowRule("null_relevance", t, opts.relevance_col, "is null", f"{rel} IS NULL"),
        RowRule(
            "bad_relevance", t, opts.relevance_col, "is NaN or infinite", f"coalesce({_is_bad_number(rel)}, false)"
        ),
    ]
    if opts.negative_relevance == "error":
        rules.append(
            RowRule(
                "negative_relevance",
                t,
                opts.relevance_col,
                'is negative (set negative_relevance = "clip" to read it as 0)',
                f"coalesce({rel} < 0, false)",
            )
        )
    if opts.gain == "exponential":
        rules.append(
            RowRule(
                "relevance_overflow",
                t,
                opts.relevance_col,
                f"is {MAX_EXPONENTIAL_RELEVANCE:.0f} or more, so 2^rel - 1 overflows a double under exponential gain",
                f"coalesce(NOT {_is_bad_number(rel)} AND {rel} >= {MAX_EXPONENTIAL_RELEVANCE}D, false)",
            )
        )
    if opts.duplicate_relevance == "error":
        rules.append(_repeated_judgement(opts))
    return rules


def rules_for(table: str, opts: EvaluationOptions, columns: Sequence[str] = ()) -> List[RowRule]:
    """The rules of ``table``; ``columns``: the table's columns (its segment columns matter)."""
    if table == "recommendations":
        return recommendation_rules(opts, [c for c in opts.group_by if c in columns])
    return relevance_rules(opts)


def key_text(opts: EvaluationOptions) -> str:
    """SQL text naming a row by its keys, e.g. ``user_id=7/item_id=42``."""

    def text(name: str) -> str:
        return f"coalesce(CAST({ident(name)} AS STRING), 'null')"

    return (
        f"concat({string_literal(opts.user_col + '=')}, {text(opts.user_col)}, "
        f"{string_literal('/' + opts.item_col + '=')}, {text(opts.item_col)})"
    )


def guard_rows(df: DataFrame, table: str, opts: EvaluationOptions) -> DataFrame:
    """Fail the run at the first row at fault, naming table, column, problem and the row's key.

    The group rules are left to :func:`guard_lists` on the per-user lists.
    """
    whens = [
        f"WHEN {rule.sql} THEN {string_literal(f'{rule.message()}, e.g. ')}"
        for rule in rules_for(table, opts, df.columns)
        if not rule.by_group
    ]
    if not whens:
        return df
    # The first problem of the row, as the start of its message; one raise_error for them all.
    problem = f"(CASE {' '.join(whens)} END)"
    return df.filter(input_check(f"{problem} IS NOT NULL", f"concat({problem}, {key_text(opts)})"))


def guard_lists(lists: DataFrame, rule_name: str, violated: str, opts: EvaluationOptions) -> DataFrame:
    """Fail the run at the first per-user row where the group rule ``rule_name`` is ``violated`` (SQL).

    The message is the rule's own (as :func:`ndcg_spark.validate` gives it), with the user.
    """
    rule = _rank_tie(opts, []) if rule_name == RANK_TIE else _repeated_judgement(opts)
    message = string_literal(f"{rule.message()}, e.g. {opts.user_col}=")
    return lists.filter(input_check(violated, f"concat({message}, CAST({ident(opts.user_col)} AS STRING))"))


def sums_checked(value: str, sums: Sequence[Tuple[str, str]], keys: Sequence[str], k: str = "k") -> str:
    """SQL: ``value``, or the run stopped at the first (list, k) row with a sum that is not a
    finite number, naming the figure, the cutoff and the list.

    ``sums``: (column, the figure it holds, e.g. ``"dcg"``) of the row; ``keys``: the columns
    that name a list (segments, then the user); ``k``: the row's cutoff column (null for the
    whole list). Every gain is finite (the row rules see to it), but a list's gains can add up
    past the largest double, and its NDCG would then be infinity over infinity: NaN in every
    output. Written into a column every output reads (the NDCG), not as a filter: a filter would
    be pushed below the projection that computes the sums, and every sum computed again for it.
    """
    whens = " ".join(f"WHEN {_is_bad_number(ident(c))} THEN {string_literal(f'{name.upper()}@')}" for c, name in sums)
    problem = f"(CASE {whens} END)"
    named = ", '/', ".join(
        f"{string_literal(key + '=')}, coalesce(CAST({ident(key)} AS STRING), 'null')" for key in keys
    )
    cutoff = f"coalesce(CAST({ident(k)} AS STRING), {string_literal(k_label(None))})"
    message = (
        f"concat({string_literal('relevance too large to add up: the ')}, {problem}, {cutoff}, "
        f"' of ', {named}, {string_literal(' overflows a double (its gains add up past 1.8e308)')})"
    )
    return f"(CASE WHEN {input_check(f'{problem} IS NOT NULL', message)} THEN {value} END)"


def split_rows(df: DataFrame, table: str, opts: EvaluationOptions) -> Tuple[DataFrame, DataFrame]:
    """(clean rows, rejected rows with a ``reason`` column: the first problem found).

    Group rules only look at rows that passed the row rules, so a null-relevance row does not
    drag a valid judgement of the same item down with it.
    """
    rules = rules_for(table, opts, df.columns)
    clean, rejected = _tag(df, [r for r in rules if not r.by_group])
    group_rules = [r for r in rules if r.by_group]
    if group_rules:
        clean, rejected_by_group = _tag(clean, group_rules)
        rejected = rejected.unionByName(rejected_by_group)
    return clean, rejected


def _tag(df: DataFrame, rules: List[RowRule]) -> Tuple[DataFrame, DataFrame]:
    whens = " ".join(f"WHEN {rule.sql} THEN {string_literal(rule.name)}" for rule in rules)
    tagged = df.selectExpr("*", f"CAST(CASE {whens} END AS STRING) AS {ident(REASON)}")
    return tagged.filter(f"{ident(REASON)} IS NULL").drop(REASON), tagged.filter(f"{ident(REASON)} IS NOT NULL")
