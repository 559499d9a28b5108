"""Comparison: two evaluations' per-user figures paired (:mod:`~ndcg_spark._comparison.paired_evaluations`)
and the statistics over the pairs (:mod:`~ndcg_spark._comparison.statistics`)."""
