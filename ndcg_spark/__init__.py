"""ndcg-spark: per-user and mean NDCG@k with graded relevance, in the Spark DataFrame API.

The public API is what ``__all__`` names; every other module and name is private.
"""

from ndcg_spark.compare import ComparisonResult, ModelComparison, compare, compare_models
from ndcg_spark.errors import ConfigError, InputDataError, NdcgError, RowCheckFailed
from ndcg_spark.evaluation import EvaluationResult, evaluate
from ndcg_spark.options import EvaluationOptions
from ndcg_spark.paired import paired_difference
from ndcg_spark.reading import read_table
from ndcg_spark.validation import TableReport, validate

__all__ = [
    "ComparisonResult",
    "ConfigError",
    "EvaluationOptions",
    "EvaluationResult",
    "InputDataError",
    "ModelComparison",
    "NdcgError",
    "RowCheckFailed",
    "TableReport",
    "compare",
    "compare_models",
    "evaluate",
    "paired_difference",
    "read_table",
    "validate",
]
__version__ = "0.1.0"
