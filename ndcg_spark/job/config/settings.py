"""Every setting of the job, declared once: its name, how a value is read, its default, its doc line
and where it applies.

From :data:`SETTINGS` come the TOML keys of each command, its flags and ``--help``
(:func:`ndcg_spark.job.config.flags.build_parser`), the manifest's ``settings`` (:func:`recorded`) and
MLflow's params (the recorded settings that are ``tracked``). The evaluation options are declared
by :class:`~ndcg_spark.EvaluationOptions` itself (type, default, help, choices); this module reads
them from it.

A value is read once, at the boundary (:func:`parse_values`): a TOML value or a flag's text becomes
a typed value (``k`` a tuple of int, ``run_date`` a :class:`~ndcg_spark.job.config.targets.Partition`),
and the typed value travels from there on. Plain dataclasses, no schema library: the package
installs on clusters with ``pip install --no-deps``, where a dependency of ours would be missing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ndcg_spark.job.config.spellings import (
    beyond_names,
    break_lock,
    cutoffs,
    gate_text,
    log_base,
    name_or_uri,
    names,
    number,
    number_text,
    parse_bool,
    parse_gains,
    positive,
    seconds,
    text,
    texts,
    trend_runs,
    whole,
)  # fmt: skip
from ndcg_spark.job.config.targets import SECRET_SETTING, Partition, redact, spark_settings
from ndcg_spark.options import WHOLE_LIST, EvaluationOptions, k_label
from ndcg_spark.reading import FORMATS, ROLES

EVALUATE, COMPARE, HISTORY = "evaluate", "compare", "history"
RUNS = (EVALUATE, COMPARE)  # ``validate`` reads evaluate's settings


# ----------------------------------------------------------------------------- the declaration


def same(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Setting:
    """One setting: where it applies and how its value is read and recorded.

    Adding a setting is adding one of these to :data:`JOB_SETTINGS` (and reading its typed value
    where it is used): its TOML key, flag, ``--help`` line, manifest entry and MLflow param follow.

    Attributes
    ----------
    name : str
        The TOML key, the config's name and (dashed) the flag.
    help : str
        ``--help``'s line (``%`` written as itself).
    read : callable
        ``(value as written in TOML or a flag, name) -> typed value``; raises ConfigError.
    default : object
        The typed value when not given.
    commands : tuple of str
        The commands it applies to (``validate`` takes ``evaluate``'s).
    flags : tuple of str
        Its spellings on the command line (default: ``--name-with-dashes``).
    toml : bool
        Whether it is a key of the TOML file (else a flag only, read by argparse itself).
    record : callable or None
        ``typed value -> JSON value`` in the manifest's ``settings``; None: not recorded.
    tracked : bool
        Whether a recorded value is also an MLflow param.
    option : bool
        A field of :class:`~ndcg_spark.EvaluationOptions` (recorded as the options resolved it).
    argument : dict
        More of argparse's keywords (``action``, ``nargs``, ``metavar``).
    helps : dict
        ``--help``'s line for a command where it differs.
    aliases : dict
        More flags per command (compare's ``--baseline`` for ``recommendations``).
    """

    name: str
    help: str
    read: Callable[[Any, str], Any] = text
    default: Any = None
    commands: Tuple[str, ...] = RUNS
    flags: Tuple[str, ...] = ()
    toml: bool = True
    record: Optional[Callable[[Any], Any]] = same
    tracked: bool = True
    option: bool = False
    argument: Mapping[str, Any] = field(default_factory=dict)
    helps: Mapping[str, str] = field(default_factory=dict)
    aliases: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)

    def flags_for(self, command: str) -> Tuple[str, ...]:
        return (*self.aliases.get(command, ()), *(self.flags or ("--" + self.name.replace("_", "-"),)))

    def help_for(self, command: str) -> str:
        return self.helps.get(command, self.help)

    def parse(self, value: Any) -> Any:
        """The typed value of ``value`` as written (None stays None: not given)."""
        return None if value is None else self.read(value, self.name)


def _flag(name: str, help: str, **kw: Any) -> Setting:
    """A flag of the command line only: not a TOML key, not recorded."""
    return Setting(name, help, toml=False, record=None, **kw)


def _redacted(pairs: Tuple[Tuple[str, str], ...]) -> Dict[str, str]:
    # A manifest is read by more people than the job's config.
    return {k: "<redacted>" if SECRET_SETTING.search(k) else v for k, v in pairs}


_EXAMPLES = {
    "recommendations": "user_id int, item_id int, score double",
    "relevance": "user_id int, item_id int, relevance double",
    "user_attributes": "user_id int, country string",
    "interactions": "user_id int, item_id int",
    "items": "item_id int, category string",
    "baseline_recommendations": "user_id int, item_id int, score double",
}
_ROLES = [
    (
        Setting(f"{role}_format", f"Format of the {role.replace('_', ' ')} (default: --format)."),
        Setting(
            f"{role}_schema",
            f"Column types of the {role.replace('_', ' ')}, e.g. '{_EXAMPLES[role]}' (default: keys as stored; "
            "CSV and JSON keys as strings).",
        ),
    )
    for role in ROLES
]
_WORSE = (
    "Non-inferiority gate [column=value:]k:margin[,...]: exit 4 (after writing) when a candidate is worse than its "
    "baseline by more than margin with 95% confidence (the interval of the paired difference lies below -margin). "
    "A filter may name a segment, baseline_model or candidate_model."
)
_DROP = (
    "Regression gate [column=value:]k:drop[,...], drop an NDCG difference (0.02) or a share of the previous mean "
    "(2%): exit 4 (after writing) when mean NDCG@k fell by more than drop since the previous complete run of the "
    "output, over the users in both, and the 95% interval of the paired difference lies below 0. Needs --run-date "
    "or --partition."
)

#: The job's own settings, in ``--help``'s order (the evaluation options follow, from their class).
JOB_SETTINGS: Tuple[Setting, ...] = (
    Setting("candidate", "Path or table of a candidate model (repeat for more).", texts, (), (COMPARE,),
            argument={"action": "append"}),
    Setting("model_col", "Or: one table (--recommendations) with this model column...", commands=(COMPARE,)),
    Setting("baseline_model", "...this value for the baseline...", commands=(COMPARE,)),
    Setting("candidate_model", "...and these for the candidates (v2[,v3...]; default: every other value).", names,
            (), (COMPARE,), record=lambda v: ",".join(v) or None),
    Setting("pairs", "'baseline': each candidate against the baseline (default); 'all': every pair of models.",
            default="baseline", commands=(COMPARE,)),
    Setting("correction", "Multiple-testing correction of the p-values across the pairs: holm (default) or "
            "bonferroni.", default="holm", commands=(COMPARE,)),
    Setting("fail_if_worse", _WORSE, gate_text, commands=(COMPARE,)),
    _flag("config", "TOML file with any of the options below; flags override it."),
    Setting("recommendations", "Path or catalog table of the recommendations.",
            aliases={COMPARE: ("--baseline",)},
            helps={COMPARE: "Path or table of the baseline model (--recommendations: the one table of --model-col)."}),
    Setting("relevance", "Path or catalog table of the relevance judgements."),
    Setting("format", f"Input format of paths: {', '.join(FORMATS)} (default: parquet).", default="parquet"),
    *(s for pair in _ROLES for s in pair),
    Setting("output", "Output directory (per_user/, summary/, summary.json).", commands=(*RUNS, HISTORY),
            helps={HISTORY: "The output directory of the runs."}),
    Setting("output_table", "Or: a family of catalog tables, db.name (db.name_summary, db.name_per_user, "
            "db.name_runs, ...); needs --run-date or --partition (docs/job.md).", commands=(*RUNS, HISTORY),
            helps={HISTORY: "Or: the family of catalog tables of the runs."}),
    Setting("output_table_format", "Format the output tables are created in: parquet, delta, iceberg (default: the "
            "catalog's)."),
    Setting("master", "Spark master when not launched by spark-submit (default: local[*]).",
            commands=(*RUNS, HISTORY)),
    Setting("spark", "A Spark setting for the session the job starts (repeat for more; also the TOML table [spark]), "
            "e.g. spark.sql.catalogImplementation=hive.", lambda v, _: spark_settings(v), (),
            (*RUNS, HISTORY), ("--conf",), record=_redacted, argument={"action": "append", "metavar": "KEY=VALUE"},
            helps={HISTORY: "A Spark setting (repeat for more), e.g. spark.sql.catalogImplementation=hive."}),
    Setting("run_date", "Write under run_date=YYYY-MM-DD (that form only), replacing only that partition.",
            lambda v, _: Partition.of_run_date(v), record=lambda p: p.value),
    Setting("partition", "Write under key=value, replacing only that partition.", lambda v, _: Partition.of_text(v),
            record=lambda p: p.directory),
    Setting("break_lock", "Also break a lock whose lease missed its renewals (a run stalled or gone on another "
            "host); a lock whose run is gone is broken without it. '--break-lock force' breaks a live run's lock "
            "too: two runs may then write one result at once (docs/job.md).", break_lock, False, record=None,
            argument={"nargs": "?", "const": True, "metavar": "force"}),
    Setting("lock_timeout", "Seconds a run's lock may go without its lease renewed before the next run breaks it "
            "(default: 300).", seconds, record=None),
    Setting("fail_below", "Quality gate [column=value:]k:threshold[,...]: exit 4 (after writing) when the mean "
            "NDCG@k of any segment (or of those matching column=value) is below.", gate_text, commands=(EVALUATE,)),
    Setting("fail_if_drop", _DROP, gate_text, commands=(EVALUATE,)),
    Setting("drop_on_estimate", "Fail --fail-if-drop on the mean difference alone, whatever its interval.",
            parse_bool, False, (EVALUATE,), argument={"action": "store_const", "const": True}),
    Setting("drop_baseline", "The run --fail-if-drop compares with: 'last' (default), the most recent earlier "
            "complete run, or 'last_passed', the most recent earlier one whose gates all passed.",
            default="last", commands=(EVALUATE,)),
    Setting("trend_runs", "Complete runs on report.html's trend chart, tonight's included (default: 14; 0: no "
            "chart). Needs --run-date or --partition.", trend_runs, 14, (EVALUATE,)),
    Setting("mlflow_experiment", "Log the run to this MLflow experiment (created if missing) after publishing; "
            "needs ndcg-spark[mlflow].", name_or_uri),
    Setting("mlflow_tracking_uri", "MLflow tracking store (default: MLflow's own, MLFLOW_TRACKING_URI).",
            name_or_uri, record=redact),
    Setting("user_attributes", "Path or table with one row per user and segment columns for group_by."),
    Setting("interactions", "Path or table of what users did before the recommendations (user, item): "
            "popularity, history and co-occurrence of the beyond-accuracy metrics."),
    Setting("items", "Path or table of the catalog (item; item_category_col, item_features_col) for the "
            "beyond-accuracy metrics."),
    Setting("baseline_recommendations", "Path or table of another model's recommendations (unexpectedness)."),
    # A Spark Connect URL may carry a token: recorded without it, never sent to a tracking server.
    Setting("remote", "Spark Connect URL, e.g. sc://host:15002/;token=... (instead of a local Spark).",
            commands=(*RUNS, HISTORY), record=redact, tracked=False),
    Setting("report", "Write DIR/report.html (default: true).", parse_bool, True, argument={"metavar": "true|false"}),
    _flag("verbose", "Print Spark's stack trace on errors, and library warnings.", default=False,
          commands=(*RUNS, HISTORY), argument={"action": "store_true"}),
    _flag("quiet", "No progress lines on stderr (also: NDCG_SPARK_QUIET=1).", default=False,
          argument={"action": "store_true"}),
    _flag("as_json", "Print one JSON document.", default=False, commands=(HISTORY,), flags=("--json",),
          argument={"action": "store_true"}),
    _flag("last", "Only the last N complete runs.", read=positive, commands=(HISTORY,)),
)  # fmt: skip


def _option_setting(f: dataclasses.Field) -> Setting:
    """An evaluation option as a setting: read as its type says, recorded as resolved."""
    readers: Dict[str, Callable[[Any, str], Any]] = {
        "k": cutoffs, "group_by": names, "gains": parse_gains, "log_base": log_base, "relevance_threshold": number,
        "beyond_accuracy": beyond_names,
    }  # fmt: skip
    kind = str(f.type)
    read = readers.get(f.name) or {"bool": parse_bool, "int": whole}.get(kind, lambda v, _: v)
    record: Callable[[Any], Any] = same
    if f.name == "k":
        record = lambda ks: [k if k is not None else k_label(k) for k in ks]  # noqa: E731
    elif f.name == "gains":  # JSON keys are strings: {"2": 5.0}, as written in TOML
        record = lambda pairs: {number_text(grade): gain for grade, gain in pairs}  # noqa: E731
    help_text = f.metadata["help"]
    if "(default" not in help_text:  # some helps say what their unset default means
        shown = WHOLE_LIST if f.name == "k" else _shown(f.default)
        help_text += f" (default: {shown})"
    argument = {"metavar": "true|false"} if kind == "bool" else {}
    return Setting(f.name, help_text, read, f.default, record=record, option=True, argument=argument)


def _shown(default: Any) -> str:
    if default is None or default == ():
        return "none"
    return str(default).lower() if isinstance(default, bool) else str(default)


#: Every setting: the job's, then the evaluation options'.
SETTINGS: Tuple[Setting, ...] = (*JOB_SETTINGS, *(_option_setting(f) for f in dataclasses.fields(EvaluationOptions)))
BY_NAME: Dict[str, Setting] = {s.name: s for s in SETTINGS}


def settings_of(command: str) -> Tuple[Setting, ...]:
    """The settings of a command (``validate``: evaluate's), in declaration order."""
    command = EVALUATE if command == "validate" else command
    return tuple(s for s in SETTINGS if command in s.commands)


def keys(command: str) -> Tuple[str, ...]:
    """The TOML keys of a command.

    Examples
    --------
    >>> "fail_if_drop" in keys("evaluate"), "fail_if_drop" in keys("compare"), "k" in keys("compare")
    (True, False, True)
    """
    return tuple(s.name for s in settings_of(command) if s.toml)


def parse_values(values: Mapping[str, Any], command: str) -> Dict[str, Any]:
    """``{key: typed value}`` of the keys given (TOML values or flags' text), each read once.

    Examples
    --------
    >>> parse_values({"k": "10,5,all", "run_date": "2026-11-21", "report": "false"}, "evaluate")
    {'k': (10, 5, None), 'run_date': Partition(key='run_date', value='2026-11-21'), 'report': False}
    """
    return {key: BY_NAME[key].parse(value) for key, value in values.items() if value is not None}


def recorded(command: str, values: Mapping[str, Any], options: EvaluationOptions) -> Dict[str, Any]:
    """The manifest's ``settings``: every recorded setting of the command, from its typed value
    (given, else its default; an option as ``options`` resolved it, preset included)."""
    out = {}
    for s in settings_of(command):
        if s.record is not None:
            value = getattr(options, s.name) if s.option else values.get(s.name, s.default)
            out[s.name] = None if value is None else s.record(value)
    return out


def untracked() -> Tuple[str, ...]:
    """The recorded settings never sent to a tracking server."""
    return tuple(s.name for s in SETTINGS if s.record is not None and not s.tracked)
