"""Comparison: two evaluations' per-user figures paired (:mod:`~ndcg_spark._comparison.pairing`)
and the statistics over the pairs (:mod:`~ndcg_spark._comparison.statistics`)."""
