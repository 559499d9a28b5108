"""The job's configuration: the TOML file and the flags, read once into a config per command
(``history``'s too: :class:`HistoryConfig`).

This is the boundary where config spellings become Python values, each setting read once as
:mod:`ndcg_spark.job.config.settings` declares it: ``k = "5,10,all"`` becomes ``(5, 10, None)``,
``run_date = "2026-11-21"`` a :class:`~ndcg_spark.job.config.targets.Partition`, ``fail_below =
"10:0.25"`` :class:`~ndcg_spark.job.config.gate_specs.Gate` objects (every gate is parsed in
:mod:`ndcg_spark.job.config.gate_specs`), ``mlflow_experiment`` a
:class:`~ndcg_spark.job.config.targets.MlflowTarget`. Past it, :class:`EvaluateConfig` or
:class:`CompareConfig` travels as itself, made of the parts both commands share
(:class:`Inputs`, :class:`~ndcg_spark.job.config.targets.Output`, the MLflow target) and one
:class:`~ndcg_spark.EvaluationOptions`. Nothing here imports the job's running parts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, Mapping, Optional, Sequence, Tuple

from ndcg_spark.compare import CORRECTIONS, PAIRINGS
from ndcg_spark.errors import ConfigError
from ndcg_spark.evaluation import BEYOND_TABLES, beyond_metrics
from ndcg_spark.job.config import settings
from ndcg_spark.job.config.flags import build_parser, load_toml
from ndcg_spark.job.config.gate_specs import DropGates, Gate, parse_gates
from ndcg_spark.job.config.targets import MlflowTarget, Output, Partition, required
from ndcg_spark.options import EvaluationOptions, check_known_keys
from ndcg_spark.reading import FORMATS, ROLES


@dataclass(frozen=True)
class Inputs:
    """The tables a run reads: paths or catalog tables, with a format and a schema per table."""

    recommendations: str
    relevance: str
    user_attributes: Optional[str] = None
    interactions: Optional[str] = None
    items: Optional[str] = None
    baseline_recommendations: Optional[str] = None
    format: str = "parquet"
    recommendations_format: Optional[str] = None
    relevance_format: Optional[str] = None
    user_attributes_format: Optional[str] = None
    interactions_format: Optional[str] = None
    items_format: Optional[str] = None
    baseline_recommendations_format: Optional[str] = None
    recommendations_schema: Optional[str] = None
    relevance_schema: Optional[str] = None
    user_attributes_schema: Optional[str] = None
    interactions_schema: Optional[str] = None
    items_schema: Optional[str] = None
    baseline_recommendations_schema: Optional[str] = None

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


#: The settings of each part (the others are the session's, the tracking's or the command's own).
INPUT_KEYS = tuple(f.name for f in dataclasses.fields(Inputs))
OUTPUT_KEYS = ("output", "output_table", "output_table_format", "report", "break_lock", "lock_timeout")


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
    #: ``--quiet``: no progress lines (a flag, not recorded).
    quiet: bool = False
    #: The settings given, each read once (:func:`~ndcg_spark.job.config.settings.parse_values`): what
    #: the manifest records (:meth:`to_dict`).
    values: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    command: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if self.remote and self.master:
            raise ConfigError("give master or remote (Spark Connect), not both")

    @classmethod
    def keys(cls) -> Tuple[str, ...]:
        """Every config key of this command (TOML keys; flags are the same with dashes)."""
        return settings.keys(cls.command)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], quiet: bool = False):
        """The config from TOML/flag values (config spellings accepted), unknown keys refused."""
        other = EvaluateConfig if cls is CompareConfig else CompareConfig
        for key in values:
            if key in other.keys() and key not in cls.keys():
                raise ConfigError(f"{key} is a key of 'ndcg-spark {other.command}', not of 'ndcg-spark {cls.command}'")
        check_known_keys(values, list(cls.keys()), "config key")
        return cls.from_values({**settings.parse_values(values, cls.command), "quiet": quiet})

    @classmethod
    def from_values(cls, values: Dict[str, Any]):
        """The config from typed values (:func:`~ndcg_spark.job.config.settings.parse_values`)."""
        opts = EvaluationOptions(**{k: v for k, v in values.items() if k in EvaluationOptions.names()})
        for key in ("recommendations", "relevance"):
            required(key, values.get(key))
        if values.get("output") is None and values.get("output_table") is None:
            required("output", None)
        inputs = Inputs(**{k: v for k, v in values.items() if k in INPUT_KEYS})
        if "run_date" in values and "partition" in values:
            raise ConfigError("give run_date or partition, not both")
        partition: Optional[Partition] = values.get("run_date") or values.get("partition")
        given = {k: values[k] for k in OUTPUT_KEYS if k in values}
        path, table, table_format = (given.pop(k, None) for k in ("output", "output_table", "output_table_format"))
        output = Output(path, partition, **given, table=table, table_format=table_format)
        # Checked here, before a session is started or anything read: MLflow asked for but not installed.
        mlflow = MlflowTarget.parse(values.get("mlflow_experiment"), values.get("mlflow_tracking_uri"))
        session = {k: values[k] for k in ("master", "remote", "spark", "quiet") if k in values}
        own = cls._own(values, opts, output)
        return cls(inputs=inputs, output=output, options=opts, mlflow=mlflow, values=values, **session, **own)

    @classmethod
    def _own(cls, values: Dict[str, Any], opts: EvaluationOptions, output: Output) -> Dict[str, Any]:
        return {}

    def to_dict(self) -> Dict[str, Any]:
        """The settings as the manifest records them, with the config's keys and spellings
        (``k = [5, "all"]``, ``run_date``, ``fail_below`` as text): each recorded setting of
        :mod:`~ndcg_spark.job.config.settings`, secrets redacted."""
        return settings.recorded(self.command, self.values, self.options)


@dataclass(frozen=True)
class EvaluateConfig(_Config):
    """``ndcg-spark``: evaluate one model's recommendations, with quality gates."""

    gates: Tuple[Gate, ...] = ()
    fail_below: Optional[str] = None
    #: The regression gate (``--fail-if-drop``), None when not asked for.
    drop: Optional[DropGates] = None
    #: Complete runs on the report's trend chart, tonight's included (0: no chart).
    trend_runs: int = 14

    command: ClassVar[str] = settings.EVALUATE

    @classmethod
    def _own(cls, values: Dict[str, Any], opts: EvaluationOptions, output: Output) -> Dict[str, Any]:
        text = values.get("fail_below")
        # The beyond-accuracy figures a gate may name: those the inputs given allow, known before any is read.
        computed = beyond_metrics(opts, [t for t in BEYOND_TABLES if values.get(t)])
        drop = DropGates.parse(
            values.get("fail_if_drop"), values.get("drop_on_estimate", False), values.get("drop_baseline"),
            opts.group_by, opts.cutoffs, output.partition is not None, computed,
        )  # fmt: skip
        return {
            "fail_below": text,
            "gates": parse_gates("floor", text, opts.group_by, opts.cutoffs, computed),
            "drop": drop,
            "trend_runs": values.get("trend_runs", 14),
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

    command: ClassVar[str] = settings.COMPARE

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
        worse = values.get("fail_if_worse")
        gates = parse_gates("worse", worse, opts.group_by, opts.cutoffs)
        own = {k: values[k] for k in ("model_col", "baseline_model", "pairs", "correction") if k in values}
        return {
            **own,
            "candidates": values.get("candidate", ()),
            "candidate_models": values.get("candidate_model", ()),
            "worse_gates": gates,
            "fail_if_worse": worse if gates else None,
        }


#: The config of each command.
CONFIGS = {"evaluate": EvaluateConfig, "compare": CompareConfig}


def parse_config(argv: Sequence[str], compare: bool = False, shown: Optional[str] = None):
    """(config, verbose) from the TOML file named by ``--config`` with the flags laid over it
    (``shown``: the command named in the usage and ``--help``, when not the config's own).

    Examples
    --------
    >>> config, _ = parse_config(["--recommendations", "r/", "--relevance", "g/", "--output-table", "ev.ndcg",
    ...                           "--run-date", "2026-11-21", "--conf", "spark.sql.catalogImplementation=hive"])
    >>> config.output.table, config.output.partition.directory, config.spark
    ('ev.ndcg', 'run_date=2026-11-21', (('spark.sql.catalogImplementation', 'hive'),))
    """
    command = settings.COMPARE if compare else settings.EVALUATE
    # --help and --version print and raise SystemExit(0); errors raise ConfigError (one line).
    args = vars(build_parser(command, shown).parse_args(list(argv)))
    # The flags that are no TOML key, already read by argparse: --config, --verbose, --quiet.
    own = {s.name: args.pop(s.name) for s in settings.settings_of(command) if not s.toml}
    values: Dict[str, Any] = load_toml(own["config"]) if own["config"] else {}
    flags = {k: v for k, v in args.items() if v is not None}
    # Flags override the file: a flag's output (or output_table) replaces the file's other one,
    # and --conf adds to the file's [spark] table (read once, together, by the setting).
    for one, other in (("output", "output_table"), ("output_table", "output")):
        if one in flags and other not in flags:
            values.pop(other, None)
    if "spark" in flags:
        table = values.get("spark")
        earlier = list(table.items()) if isinstance(table, dict) else [] if table is None else table
        flags["spark"] = [*(earlier if isinstance(earlier, list) else [earlier]), *flags["spark"]]
    values.update(flags)
    return CONFIGS[command].from_mapping(values, quiet=own["quiet"]), own["verbose"]


@dataclass(frozen=True)
class HistoryConfig:
    """``ndcg-spark history``: the output whose runs to show, how many, and how."""

    output: Optional[str]
    last: Optional[int] = None
    as_json: bool = False
    master: Optional[str] = None
    remote: Optional[str] = None
    #: The family of catalog tables of the runs, instead of an output directory.
    output_table: Optional[str] = None
    spark: Tuple[Tuple[str, str], ...] = ()

    command = "history"

    @classmethod
    def parse(cls, argv: Sequence[str]) -> Tuple[HistoryConfig, bool]:
        """(config, verbose) from the command line (after ``history``)."""
        args = vars(build_parser(settings.HISTORY).parse_args(list(argv)))
        verbose = args.pop("verbose")
        # --json and --last were read by argparse; the others, keys of a run's config too, here.
        args.update(settings.parse_values({k: v for k, v in args.items() if settings.BY_NAME[k].toml}, "history"))
        if args["output"] is None and args["output_table"] is None:
            raise ConfigError("the following arguments are required: --output (or --output-table)")
        if args["output"] is not None and args["output_table"] is not None:
            raise ConfigError("give --output (the output directory of the runs) or --output-table, not both")
        if args["output"] is not None and not args["output"].strip():
            raise ConfigError("output is required: the output directory of the runs")
        args["spark"] = args["spark"] or ()
        if args["master"] and args["remote"]:
            raise ConfigError("give master or remote (Spark Connect), not both")
        return cls(**args), verbose
