"""ndcg-spark: per-user and mean NDCG@k with graded relevance, in the Spark DataFrame API."""

from ndcg_spark.errors import ConfigError, InputDataError, NdcgError
from ndcg_spark.core import EvaluationResult, evaluate
from ndcg_spark.options import EvaluationOptions
from ndcg_spark.validation import validate

__all__ = [
    "ConfigError",
    "EvaluationOptions",
    "EvaluationResult",
    "InputDataError",
    "NdcgError",
    "evaluate",
    "validate",
]
__version__ = "0.1.0"
