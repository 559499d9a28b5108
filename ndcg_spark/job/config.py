"""The job's configuration: the TOML file and the flags, read once into a config per command.

This is the boundary where config spellings become Python values: ``k = "5,10,all"`` becomes
``(5, 10, None)``, ``run_date = "2026-11-21"`` a :class:`Partition`, ``fail_below = "10:0.25"``
:class:`~ndcg_spark.job.gates.Gate` objects (every gate is parsed in :mod:`ndcg_spark.job.gates`),
``mlflow_experiment`` a :class:`~ndcg_spark.job.tracking.MlflowTarget`. Past it,
:class:`EvaluateConfig` or :class:`CompareConfig` travels as itself, made of the parts both
commands share (:class:`Inputs`, :class:`Output`, the MLflow target) and one
:class:`~ndcg_spark.EvaluationOptions`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, Optional, Sequence, Tuple

from ndcg_spark.compare import CORRECTIONS, PAIRINGS
from ndcg_spark.errors import ConfigError
from ndcg_spark.job.flags import load_toml, number_text, option_value, parse_bool
from ndcg_spark.job.gates import DropGates, Gate, parse_gates
from ndcg_spark.job.lease import FORCE
from ndcg_spark.job.targets import SECRET_SETTING, Output, Partition, required, spark_settings
from ndcg_spark.job.tracking import MlflowTarget, redact
from ndcg_spark.options import EvaluationOptions, check_known_keys, k_label
from ndcg_spark.reading import FORMATS, ROLES


@dataclass(frozen=True)
class Inputs:
    """The tables a run reads: paths or catalog tables, with a format and a schema per table."""

    recommendations: str
    relevance: str
    user_attributes: Optional[str] = None
    format: str = "parquet"
    recommendations_format: Optional[str] = None
    relevance_format: Optional[str] = None
    user_attributes_format: Optional[str] = None
    recommendations_schema: Optional[str] = None
    relevance_schema: Optional[str] = None
    user_attributes_schema: Optional[str] = None

    def __post_init__(self) -> None:
        for name in ("recommendations", "relevance"):
            required(name, getattr(self, name))
        for name in ("format", *(f"{role}_format" for role in ROLES)):
            value = getattr(self, name)
            if value is not None and value not in FORMATS:
                raise ConfigError(f"{name} = {value!r} is not one of {', '.join(FORMATS)}")
        if self.user_attributes and self.format_of("user_attributes") == "trec":
            raise ConfigError("user attributes cannot be read as trec; set user_attributes_format")

    def format_of(self, role: str) -> str:
        """The format of one input table (``recommendations``, ``relevance``, ``user_attributes``)."""
        return getattr(self, f"{role}_format") or self.format


def _seconds(value: Any, name: str) -> Any:
    """A number of seconds as written in TOML or a flag (checked by :class:`Output`)."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise ConfigError(f"{name} must be a number of seconds, got {value!r}") from None
    return value


#: The config keys of each part; a key of neither part nor the options is the command's own.
INPUT_KEYS = tuple(f.name for f in dataclasses.fields(Inputs))
OUTPUT_KEYS = ("output", "output_table", "output_table_format", "run_date", "partition", "report", "break_lock",
               "lock_timeout")  # fmt: skip
#: ``spark``: the TOML table ``[spark]`` of Spark settings (``--conf key=value`` flags add to it).
SESSION_KEYS = ("master", "remote", "spark")
TRACKING_KEYS = ("mlflow_experiment", "mlflow_tracking_uri")


@dataclass(frozen=True)
class _Config:
    inputs: Inputs
    output: Output
    options: EvaluationOptions = field(default_factory=EvaluationOptions)
    master: Optional[str] = None
    remote: Optional[str] = None
    mlflow: Optional[MlflowTarget] = None
    #: Spark settings for a session the job starts: ``[spark]`` in TOML and ``--conf key=value``.
    spark: Tuple[Tuple[str, str], ...] = ()

    #: The command's own keys (besides inputs, output, session and the evaluation options).
    OWN_KEYS: ClassVar[Tuple[str, ...]] = ()
    command: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if self.remote and self.master:
            raise ConfigError("give master or remote (Spark Connect), not both")

    @classmethod
    def keys(cls) -> Tuple[str, ...]:
        """Every config key of this command (TOML keys; flags are the same with dashes)."""
        return (*INPUT_KEYS, *OUTPUT_KEYS, *SESSION_KEYS, *TRACKING_KEYS, *cls.OWN_KEYS, *EvaluationOptions.names())

    @classmethod
    def from_mapping(cls, values: Dict[str, Any]):
        """The config from TOML/flag values (config spellings accepted), unknown keys refused."""
        other = EvaluateConfig if cls is CompareConfig else CompareConfig
        for key in values:
            if key in other.OWN_KEYS:
                raise ConfigError(f"{key} is a key of 'ndcg-spark {other.command}', not of 'ndcg-spark {cls.command}'")
        check_known_keys(values, list(cls.keys()), "config key")
        opts = EvaluationOptions(**{k: option_value(k, v) for k, v in values.items() if k in EvaluationOptions.names()})
        for key in ("recommendations", "relevance"):
            required(key, values.get(key))
        if values.get("output") is None and values.get("output_table") is None:
            required("output", None)
        inputs = Inputs(**{k: v for k, v in values.items() if k in INPUT_KEYS})
        force = str(values.get("break_lock")).strip().lower() == FORCE
        flags = {k: parse_bool(values[k], k) if isinstance(values[k], str) else values[k]
                 for k in ("report", "break_lock") if k in values and not (k == "break_lock" and force)}  # fmt: skip
        if force:
            flags["break_lock"] = FORCE
        if "lock_timeout" in values:
            flags["lock_timeout"] = _seconds(values["lock_timeout"], "lock_timeout")
        table = {"table": values.get("output_table"), "table_format": values.get("output_table_format")}
        partition = Partition.parse(values.get("run_date"), values.get("partition"))
        output = Output(values.get("output"), partition, **flags, **table)
        own = {k: v for k, v in values.items() if k in cls.OWN_KEYS}
        session = {k: v for k, v in values.items() if k in SESSION_KEYS and k != "spark"}
        session["spark"] = spark_settings(values.get("spark"))
        # Checked here, before a session is started or anything read: MLflow asked for but not installed.
        mlflow = MlflowTarget.parse(*(values.get(k) for k in TRACKING_KEYS))
        return cls(inputs=inputs, output=output, options=opts, **session, mlflow=mlflow, **cls._own(own, opts, output))

    @classmethod
    def _own(cls, values: Dict[str, Any], opts: EvaluationOptions, output: Output) -> Dict[str, Any]:
        return values

    def to_dict(self) -> Dict[str, Any]:
        """The settings as the manifest records them, with the config's keys and spellings
        (``k = ["5", "all"]``, ``run_date``, ``fail_below`` as text)."""
        part, uri = self.output.partition, self.mlflow.tracking_uri if self.mlflow else None
        settings = {
            **dataclasses.asdict(self.inputs),
            "output": self.output.path,
            "output_table": self.output.table,
            "output_table_format": self.output.table_format,
            "run_date": part.value if part and part.key == "run_date" else None,
            "partition": part.directory if part and part.key != "run_date" else None,
            "report": self.output.report,
            "master": self.master,
            "spark": {k: "<redacted>" if SECRET_SETTING.search(k) else v for k, v in self.spark},
            # A Spark Connect URL may carry a token: the manifest is read by more people than the job's config.
            "remote": redact(self.remote) if self.remote else None,
            "mlflow_experiment": self.mlflow.experiment if self.mlflow else None,
            "mlflow_tracking_uri": redact(uri) if uri else None,
            **self._own_settings(),
        }
        options = dataclasses.asdict(self.options)
        options["k"] = [k if k is not None else k_label(k) for k in self.options.cutoffs]
        # JSON keys are strings: the map of grade to gain as {"2": 5.0}, as written in TOML.
        options["gains"] = {number_text(grade): gain for grade, gain in self.options.gains}
        return {**settings, **options}

    def _own_settings(self) -> Dict[str, Any]:
        return {}


@dataclass(frozen=True)
class EvaluateConfig(_Config):
    """``ndcg-spark``: evaluate one model's recommendations, with quality gates."""

    gates: Tuple[Gate, ...] = ()
    fail_below: Optional[str] = None
    #: The regression gate (``--fail-if-drop``), None when not asked for.
    drop: Optional[DropGates] = None
    #: Complete runs on the report's trend chart, tonight's included (0: no chart).
    trend_runs: int = 14

    OWN_KEYS: ClassVar[Tuple[str, ...]] = (
        "fail_below", "fail_if_drop", "drop_on_estimate", "drop_baseline", "trend_runs",
    )  # fmt: skip
    command: ClassVar[str] = "evaluate"

    @classmethod
    def _own(cls, values: Dict[str, Any], opts: EvaluationOptions, output: Output) -> Dict[str, Any]:
        text = values.get("fail_below")
        estimate = values.get("drop_on_estimate", False)
        estimate = parse_bool(estimate, "drop_on_estimate") if isinstance(estimate, str) else estimate
        if not isinstance(estimate, bool):
            raise ConfigError(f"drop_on_estimate must be true or false, got {estimate!r}")
        drop = DropGates.parse(
            values.get("fail_if_drop"), estimate, values.get("drop_baseline"), opts.group_by, opts.cutoffs,
            output.partition is not None,
        )  # fmt: skip
        trend = values.get("trend_runs", 14)
        if isinstance(trend, str) and trend.strip().isdigit():
            trend = int(trend)
        if isinstance(trend, bool) or not isinstance(trend, int) or trend < 0:
            raise ConfigError(f"trend_runs must be a whole number of runs (0: no trend chart), got {trend!r}")
        return {
            "fail_below": text,
            "gates": parse_gates("floor", text, opts.group_by, opts.cutoffs),
            "drop": drop,
            "trend_runs": trend,
        }

    def _own_settings(self) -> Dict[str, Any]:
        drop = self.drop
        return {
            "fail_below": self.fail_below,
            "fail_if_drop": drop.spec if drop else None,
            "drop_on_estimate": drop.on_estimate if drop else False,
            "drop_baseline": drop.baseline if drop else "last",
            "trend_runs": self.trend_runs,
        }


@dataclass(frozen=True)
class CompareConfig(_Config):
    """``ndcg-spark compare``: two or more models, as tables (the baseline is the
    recommendations, the candidates ``candidate``) or as the values of one table's model column."""

    candidates: Tuple[str, ...] = ()
    model_col: Optional[str] = None
    baseline_model: Optional[str] = None
    candidate_models: Tuple[str, ...] = ()
    pairs: str = "baseline"
    correction: str = "holm"
    #: The non-inferiority gates (``--fail-if-worse``) and their spelling.
    worse_gates: Tuple[Gate, ...] = ()
    fail_if_worse: Optional[str] = None

    OWN_KEYS: ClassVar[Tuple[str, ...]] = (
        "candidate", "model_col", "baseline_model", "candidate_model", "pairs", "correction", "fail_if_worse",
    )  # fmt: skip
    command: ClassVar[str] = "compare"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, choices in (("pairs", PAIRINGS), ("correction", CORRECTIONS)):
            if getattr(self, name) not in choices:
                raise ConfigError(f"{name} = {getattr(self, name)!r} is not one of {', '.join(choices)}")
        if self.candidates and (self.model_col or self.baseline_model or self.candidate_models):
            raise ConfigError("give --candidate, or --model-col with --baseline-model and --candidate-model, not both")
        if not self.candidates and not self.model_col:
            raise ConfigError("compare needs --candidate, or --model-col with --baseline-model and --candidate-model")
        if self.model_col and not self.baseline_model and self.pairs == "baseline":
            raise ConfigError("compare --model-col needs --baseline-model (or --pairs all)")

    @classmethod
    def _own(cls, values: Dict[str, Any], opts: EvaluationOptions, output: Output) -> Dict[str, Any]:
        own = dict(values)
        worse = own.pop("fail_if_worse", None)
        gates = parse_gates("worse", worse, opts.group_by, opts.cutoffs)
        if gates:
            own.update(worse_gates=gates, fail_if_worse=",".join(worse) if isinstance(worse, list) else str(worse))
        candidate = own.pop("candidate", None)
        candidates = [candidate] if isinstance(candidate, str) else list(candidate or ())
        if any(not isinstance(v, str) or not v.strip() for v in candidates):
            raise ConfigError(f"candidate must be a path or table, or a list of them, got {candidate!r}")
        names = str(own.pop("candidate_model", None) or "").split(",")
        return {
            **own,
            "candidates": tuple(candidates),
            "candidate_models": tuple(n.strip() for n in names if n.strip()),
        }

    def _own_settings(self) -> Dict[str, Any]:
        return {
            "candidate": list(self.candidates),
            "model_col": self.model_col,
            "baseline_model": self.baseline_model,
            "candidate_model": ",".join(self.candidate_models) or None,
            "pairs": self.pairs,
            "correction": self.correction,
            "fail_if_worse": self.fail_if_worse,
        }


#: The config of each command.
CONFIGS = {"evaluate": EvaluateConfig, "compare": CompareConfig}


def parse_config(argv: Sequence[str], compare: bool = False):
    """(config, verbose) from the TOML file named by ``--config`` with the flags laid over it.

    Examples
    --------
    >>> config, _ = parse_config(["--recommendations", "r/", "--relevance", "g/", "--output-table", "ev.ndcg",
    ...                           "--run-date", "2026-11-21", "--conf", "spark.sql.catalogImplementation=hive"])
    >>> config.output.table, config.output.partition.directory, config.spark
    ('ev.ndcg', 'run_date=2026-11-21', (('spark.sql.catalogImplementation', 'hive'),))
    """
    from ndcg_spark.job.flags import build_parser

    parser = build_parser(compare)
    # --help and --version print and raise SystemExit(0); errors raise ConfigError (one line).
    args = parser.parse_args(list(argv))
    values: Dict[str, Any] = {}
    if args.config:
        values.update(load_toml(args.config))
    flags = {k: v for k, v in vars(args).items() if k not in ("config", "verbose", "quiet") and v is not None}
    # Flags override the file: a flag's output (or output_table) replaces the file's other one,
    # and --conf adds to the file's [spark] table.
    for one, other in (("output", "output_table"), ("output_table", "output")):
        if one in flags and other not in flags:
            values.pop(other, None)
    if "spark" in flags:
        flags["spark"] = [*spark_settings(values.get("spark")), *spark_settings(flags["spark"])]
    values.update(flags)
    return CONFIGS["compare" if compare else "evaluate"].from_mapping(values), args.verbose
