"""The report's charts as SVG: NDCG's (:mod:`~ndcg_spark._charts.plots`) and beyond accuracy's
(:mod:`~ndcg_spark._charts.beyond_accuracy`)."""
