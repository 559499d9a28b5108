"""``NdcgEvaluator``: mean NDCG@k as a Spark ML ``Evaluator``, for ``CrossValidator`` and
``TrainValidationSplit``.

The evaluator turns the frame it is given into the two tables :func:`ndcg_spark.evaluate`
reads and returns that evaluation's mean NDCG@k: the figure is the library's, computed once,
with the same conventions. It reads two shapes, told apart by the type of ``predictionCol``:

* **rows** (numeric ``predictionCol``): a fitted model's ``transform`` of a validation split,
  one row per held-out (user, item) with the model's ``prediction`` and the user's ``label``
  (a rating, a click). Each user's held-out items are ranked by prediction and graded by label.
* **arrays** (array ``predictionCol``): one row per user with the ranked items, as
  ``recommendForAllUsers`` gives them (``array<struct<item, rating>>``, the struct's item field
  named ``itemCol``) or as ``RankingEvaluator`` takes them (an array of items, first is best),
  and the labels in ``labelCol`` as an array of relevant items (relevance 1, as
  ``RankingEvaluator``), an ``array<struct<item, label>>`` (fields ``itemCol`` and ``labelCol``)
  or a ``map<item, label>``. The array order is the ranking.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

from pyspark import keyword_only
from pyspark.ml.evaluation import Evaluator
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import HasLabelCol, HasPredictionCol
from pyspark.ml.util import DefaultParamsReadable, DefaultParamsWritable
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ndcg_spark._spark.sql import ident
from ndcg_spark.errors import MISSING_COLUMN, InputDataError, input_errors
from ndcg_spark.evaluation import evaluate
from ndcg_spark.options import EvaluationOptions

#: The Param of each option the evaluator exposes, Spark ML spelling -> EvaluationOptions field.
OPTION_PARAMS = {
    "gain": "gain",
    "ties": "ties",
    "tieBreak": "tie_break",
    "zeroIdcg": "zero_idcg",
    "noRecommendations": "no_recommendations",
    "negativeRelevance": "negative_relevance",
    "capIdealAtListLength": "cap_ideal_at_list_length",
}

_DEFAULTS = EvaluationOptions()
_RANKED, _LABEL = "__ndcg_ranked", "__ndcg_label"
#: The array shape, read by the library's 'array' layout, ranked by position.
_ARRAY_OPTIONS: Dict[str, Any] = {
    "recommendations_layout": "array",
    "array_col": _RANKED,
    "array_ranking": "order",
    "relevance_col": _LABEL,
}


def _help(field: str) -> str:
    return EvaluationOptions.__dataclass_fields__[field].metadata["help"]


class NdcgEvaluator(Evaluator, HasLabelCol, HasPredictionCol, DefaultParamsReadable, DefaultParamsWritable):
    """Mean NDCG@k over users, larger is better, computed by :func:`ndcg_spark.evaluate`.

    Parameters
    ----------
    k : int
        The cutoff (default 10).
    userCol, itemCol, predictionCol, labelCol : str
        Column names (defaults ``user``, ``item``, ``prediction``, ``label``, as ALS and
        ``RankingEvaluator``).
    gain, ties, tieBreak, zeroIdcg, noRecommendations, negativeRelevance, capIdealAtListLength
        The conventions and policies of :class:`~ndcg_spark.EvaluationOptions` (``gain`` is
        ``gain``, ``tieBreak`` is ``tie_break``, ...), with the same defaults.

    Raises
    ------
    ConfigError
        A Param value out of its choices (when the evaluator runs).
    InputDataError
        A missing column, an unsupported type, or a frame with no user to score.

    Examples
    --------
    >>> rows = spark.createDataFrame(
    ...     [(1, 10, 0.9, 0.0), (1, 11, 0.5, 3.0), (2, 10, 0.2, 1.0)],
    ...     "user int, item int, prediction double, label double",
    ... )
    >>> evaluator = NdcgEvaluator(k=2)
    >>> round(evaluator.evaluate(rows), 4)  # user 1: 3/log2(3) / 3; user 2: 1
    0.8155
    >>> evaluator.isLargerBetter()
    True
    >>> arrays = spark.createDataFrame([(1, [11, 10], [11])], "user int, prediction array<int>, label array<int>")
    >>> evaluator.evaluate(arrays)
    1.0
    """

    k = Param(Params._dummy(), "k", "The cutoff of NDCG@k (a positive integer).", TypeConverters.toInt)
    userCol = Param(Params._dummy(), "userCol", "User column.", TypeConverters.toString)
    itemCol = Param(Params._dummy(), "itemCol", "Item column (or struct field of the arrays).", TypeConverters.toString)
    gain = Param(Params._dummy(), "gain", _help("gain"), TypeConverters.toString)
    ties = Param(Params._dummy(), "ties", _help("ties"), TypeConverters.toString)
    tieBreak = Param(Params._dummy(), "tieBreak", _help("tie_break"), TypeConverters.toString)
    zeroIdcg = Param(Params._dummy(), "zeroIdcg", _help("zero_idcg"), TypeConverters.toString)
    noRecommendations = Param(
        Params._dummy(), "noRecommendations", _help("no_recommendations"), TypeConverters.toString
    )
    negativeRelevance = Param(
        Params._dummy(), "negativeRelevance", _help("negative_relevance"), TypeConverters.toString
    )
    capIdealAtListLength = Param(
        Params._dummy(), "capIdealAtListLength", _help("cap_ideal_at_list_length"), TypeConverters.toBoolean
    )

    @keyword_only
    def __init__(
        self,
        *,
        k: int = 10,
        userCol: str = "user",
        itemCol: str = "item",
        predictionCol: str = "prediction",
        labelCol: str = "label",
        gain: str = _DEFAULTS.gain,
        ties: str = _DEFAULTS.ties,
        tieBreak: str = _DEFAULTS.tie_break,
        zeroIdcg: str = _DEFAULTS.zero_idcg,
        noRecommendations: str = _DEFAULTS.no_recommendations,
        negativeRelevance: str = _DEFAULTS.negative_relevance,
        capIdealAtListLength: bool = _DEFAULTS.cap_ideal_at_list_length,
    ) -> None:
        super().__init__()
        self._setDefault(
            k=10,
            userCol="user",
            itemCol="item",
            predictionCol="prediction",
            labelCol="label",
            **{param: getattr(_DEFAULTS, field) for param, field in OPTION_PARAMS.items()},
        )
        self._set(**self._input_kwargs)

    @keyword_only
    def setParams(self, **kwargs: Any) -> NdcgEvaluator:
        """Set any of the Params by keyword."""
        return self._set(**self._input_kwargs)

    def setK(self, value: int) -> NdcgEvaluator:
        return self._set(k=value)

    def getK(self) -> int:
        return self.getOrDefault(self.k)

    def setUserCol(self, value: str) -> NdcgEvaluator:
        return self._set(userCol=value)

    def getUserCol(self) -> str:
        return self.getOrDefault(self.userCol)

    def setItemCol(self, value: str) -> NdcgEvaluator:
        return self._set(itemCol=value)

    def getItemCol(self) -> str:
        return self.getOrDefault(self.itemCol)

    def setPredictionCol(self, value: str) -> NdcgEvaluator:
        return self._set(predictionCol=value)

    def setLabelCol(self, value: str) -> NdcgEvaluator:
        return self._set(labelCol=value)

    def isLargerBetter(self) -> bool:
        return True

    def options(self) -> EvaluationOptions:
        """The :class:`~ndcg_spark.EvaluationOptions` the Params stand for (rows shape)."""
        return EvaluationOptions(
            k=(self.getK(),),
            user_col=self.getUserCol(),
            item_col=self.getItemCol(),
            score_col=self.getPredictionCol(),
            relevance_col=self.getLabelCol(),
            **{field: self.getOrDefault(param) for param, field in OPTION_PARAMS.items()},
        )

    def _evaluate(self, dataset: DataFrame) -> float:
        opts = self.options()
        user, prediction = opts.user_col, opts.score_col
        for name in (user, prediction, opts.relevance_col):
            if name not in dataset.columns:
                raise InputDataError(
                    f"NdcgEvaluator: the frame has no column {name!r} (it has: {', '.join(dataset.columns)})",
                    condition=MISSING_COLUMN,
                    parameters={"table": "frame", "column": name},
                )
        if isinstance(dataset.schema[prediction].dataType, T.ArrayType):
            result = evaluate(*_array_tables(dataset, opts), opts.updated(**_ARRAY_OPTIONS))
        else:
            # One frame holds both tables: the ranking reads (user, item, prediction), the
            # judgements (user, item, label).
            result = evaluate(dataset, dataset, opts)
        with input_errors():
            row = result.summary.select("users", "mean_ndcg").first()
        if row is None or not row["users"]:
            raise InputDataError("NdcgEvaluator: no user to score (the frame is empty, or every user is excluded)")
        return float(row["mean_ndcg"])


def _array_tables(dataset: DataFrame, opts: EvaluationOptions) -> Tuple[DataFrame, DataFrame]:
    """(recommendations in the 'array' layout, relevance rows) of the array shape."""
    user, item, prediction, label = opts.user_col, opts.item_col, opts.score_col, opts.relevance_col
    predicted = dataset.schema[prediction].dataType.elementType
    ranked = F.col(ident(prediction))
    if not isinstance(predicted, T.StructType):
        # RankingEvaluator's shape: bare items, first is best.
        ranked = F.transform(ranked, lambda x: F.struct(_item_key(x, predicted).alias(item)))
    recs = dataset.select(F.col(ident(user)), ranked.alias(_RANKED))
    labels = dataset.schema[label].dataType
    if isinstance(labels, T.MapType):
        pairs = dataset.select(F.col(ident(user)), F.explode(F.col(ident(label))).alias(item, _LABEL))
    elif isinstance(labels, T.ArrayType) and isinstance(labels.elementType, T.StructType):
        fields = labels.elementType.fieldNames()
        if item not in fields or label not in fields:
            raise InputDataError(
                f"NdcgEvaluator: labels array {label!r} needs fields {item!r} and {label!r} (it has: {', '.join(fields)})"
            )
        element = F.explode(F.col(ident(label))).alias("__e")
        pairs = dataset.select(F.col(ident(user)), element).select(
            F.col(ident(user)), F.col("__e")[item].alias(item), F.col("__e")[label].alias(_LABEL)
        )
    elif isinstance(labels, T.ArrayType):
        # RankingEvaluator's shape: the relevant items, each relevance 1.
        pairs = dataset.select(F.col(ident(user)), F.explode(F.col(ident(label))).alias("__e")).select(
            F.col(ident(user)), _item_key(F.col("__e"), labels.elementType).alias(item), F.lit(1.0).alias(_LABEL)
        )
    else:
        raise InputDataError(
            f"NdcgEvaluator: with array predictions, labels {label!r} must be an array or a map, "
            f"not {labels.simpleString()}"
        )
    return recs, pairs


def _item_key(item: Column, dtype: T.DataType) -> Column:
    """An item of RankingEvaluator's ``array<double>`` as its text (Spark's cast), so it can be a
    key: both arrays are read the same way, so ``3.0`` in one matches ``3.0`` in the other."""
    return item.cast("string") if isinstance(dtype, (T.FloatType, T.DoubleType)) else item
