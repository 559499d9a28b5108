"""Beyond accuracy: novelty, surprisal, popularity, diversity, serendipity, unexpectedness and coverage.

A stage beside scoring. It reads the ranked lists (segments, user, ``ITEMS``: the contract's
columns, :mod:`ndcg_spark._stages.contract`), the judged lists (for serendipity's relevance) and the
optional tables of :class:`~ndcg_spark._beyond.sources.Tables`, and gives one row per (list, k)
with each asked per-user metric, joined onto the scored rows, and per segment and k the means
with their intervals and the global figures. A module per concern:

* :mod:`~ndcg_spark._beyond.sources`: which inputs a metric reads; the tables read and checked;
* :mod:`~ndcg_spark._beyond.novelty`: popularity, self-information, surprisal, head, and the
  per-user metrics over them (novelty, popularity, long tail, surprisal, unseen share,
  unexpectedness);
* :mod:`~ndcg_spark._beyond.similarity`: history, co-occurrence, category and feature cosines,
  and the per-user metrics over them (diversity, category diversity, serendipity);
* :mod:`~ndcg_spark._beyond.per_user`: the lists as arrays of structs, each metric per k,
  joined onto the scored rows;
* :mod:`~ndcg_spark._beyond.exposure`: each item's exposure and the global figures;
* :mod:`~ndcg_spark._beyond.means`: the summary's means and intervals;
* :mod:`~ndcg_spark._beyond.columns`: the stage's own columns and shared SQL.

Definitions and each peer's switches: ``docs/conventions.md`` (Beyond accuracy).
"""
