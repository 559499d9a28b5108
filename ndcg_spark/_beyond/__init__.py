"""Beyond accuracy: novelty, surprisal, popularity, diversity, serendipity, unexpectedness and coverage.

A stage beside scoring. It reads the ranked lists (segments, user, ``ITEMS``: the contract's
columns, :mod:`ndcg_spark._stages.column_contract`), the judged lists (for serendipity's relevance) and the
optional tables of :class:`~ndcg_spark._beyond.sources.Tables`, and gives one row per (list, k)
with each asked per-user metric, joined onto the scored rows, and per segment and k the means
with their intervals and the global figures. A module per concern:

* :mod:`~ndcg_spark._beyond.sources`: which inputs a metric reads; the tables read and checked;
* :mod:`~ndcg_spark._beyond.novelty`: popularity, self-information, surprisal and head, as the
  per-user metrics' declarations ask for them;
* :mod:`~ndcg_spark._beyond.similarity`: history, co-occurrence, category and feature cosines
  (diversity's and serendipity's sums);
* :mod:`~ndcg_spark._beyond.per_user`: the lists as arrays of structs, each metric per k (its SQL
  from its declaration, :mod:`ndcg_spark._metrics.beyond`), joined onto the scored rows;
* :mod:`~ndcg_spark._beyond.exposure`: each item's exposure and the global figures;
* :mod:`~ndcg_spark._beyond.means`: the summary's means and intervals;
* :mod:`~ndcg_spark._beyond.columns`: the stage's own columns and shared SQL.

Each metric is declared once, in the metric registry (:mod:`ndcg_spark._metrics.registry`): its
name, inputs, per-user SQL, summary aggregation and direction; this stage reads the declarations.
Definitions and each peer's switches: ``docs/conventions.md`` (Beyond accuracy).
"""
