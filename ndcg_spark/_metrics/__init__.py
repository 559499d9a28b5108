"""The metric registry: every metric declared once, with its name, what it reads, its per-user
expression and how the summary aggregates it; scoring, beyond accuracy, the summary, the
console, the report, MLflow, the gates and compare read the declarations from here
(:mod:`~ndcg_spark._metrics.registry`; the built-in beyond-accuracy metrics are
:mod:`~ndcg_spark._metrics.beyond`'s, registered as this package is imported).
"""

from ndcg_spark._metrics import beyond as beyond  # the built-in declarations, registered
