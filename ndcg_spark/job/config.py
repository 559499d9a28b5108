"""The job's configuration: the TOML file and the flags, read once into a :class:`JobConfig`.

This is the boundary where config spellings become Python values: ``k = "5,10,all"`` becomes
``(5, 10, None)``, ``group_by = "model,country"`` a tuple, ``--companion-metrics true`` a bool.
Past it, one :class:`~ndcg_spark.EvaluationOptions` travels as itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import tomllib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ndcg_spark.errors import ConfigError
from ndcg_spark.options import WHOLE_LIST, Cutoff, EvaluationOptions, check_known_keys, k_label

FORMATS = ("parquet", "csv", "json", "orc")
#: Characters Spark escapes in partition directory names (and the space, which tools mangle).
UNSAFE_PARTITION_CHARS = "\"#%'*/:=?\\{}[]^ "
#: Config keys holding paths: written ./x or ../x in a file, they are relative to the file.
PATH_KEYS = ("recommendations", "relevance", "output", "user_attributes", "candidate")


@dataclass(frozen=True)
class JobConfig:
    """Everything the job needs: where to read and write, and the evaluation options."""

    recommendations: str
    relevance: str
    output: str
    format: str = "parquet"
    master: Optional[str] = None
    run_date: Optional[str] = None
    partition: Optional[str] = None
    fail_below: Optional[str] = None
    user_attributes: Optional[str] = None
    remote: Optional[str] = None
    report: bool = True
    # `ndcg-spark compare` only: the candidate table (the baseline is `recommendations`), or a
    # model column with the two model names when both live in `recommendations`.
    candidate: Optional[str] = None
    model_col: Optional[str] = None
    baseline_model: Optional[str] = None
    candidate_model: Optional[str] = None
    options: EvaluationOptions = field(default_factory=EvaluationOptions)

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"format = {self.format!r} is not one of {', '.join(FORMATS)}")
        if self.remote and self.master:
            raise ConfigError("give master or remote (Spark Connect), not both")
        if self.run_date is not None:
            try:
                datetime.date.fromisoformat(str(self.run_date))
            except ValueError:
                raise ConfigError(f"run_date = {self.run_date!r} is not a date of the form YYYY-MM-DD") from None
            if self.partition is not None:
                raise ConfigError("give run_date or partition, not both")
        for name in ("recommendations", "relevance", "output"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(
                    f"{name} is required (a path or a catalog table); set it in the config or as --{name}"
                )
        self.partition_spec  # noqa: B018 - validates
        self.gates  # noqa: B018 - validates

    @property
    def partition_spec(self) -> Optional[Tuple[str, str]]:
        """(column, value) of the output partition this run owns, if any."""
        if self.run_date is not None:
            return ("run_date", str(self.run_date))
        if self.partition is None:
            return None
        key, sep, value = str(self.partition).partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value or "/" in value:
            raise ConfigError(f"partition = {self.partition!r} must look like key=value")
        # The partition is written as the directory key=value: characters that Spark escapes in
        # partition paths would be read back as another value.
        unsafe = sorted(set(UNSAFE_PARTITION_CHARS) & set(key + value))
        if unsafe:
            raise ConfigError(
                f"partition = {self.partition!r} holds characters not allowed in a partition: {' '.join(unsafe)}"
            )
        if key.startswith((".", "_")):
            # Spark's file listing skips such directories: the run would be written but never read.
            raise ConfigError(f"partition = {self.partition!r}: a partition column may not start with '.' or '_'")
        return (key, value)

    @property
    def gates(self) -> List[Tuple[Tuple[Tuple[str, str], ...], Cutoff, float]]:
        """Quality gates parsed from ``fail_below`` ("10:0.25,5:0.2", "model=v2:10:0.25"):
        (segment filter as (column, value) pairs, k, threshold). An empty filter holds every segment."""
        if not self.fail_below:
            return []
        gates = []
        for part in str(self.fail_below).split(","):
            fields = part.strip().rsplit(":", 2)
            where = fields.pop(0) if len(fields) == 3 else ""
            k_text, threshold = fields if len(fields) == 2 else ("", "")
            try:
                k = parse_cutoff(k_text)
                value = float(threshold)
            except (ConfigError, ValueError):
                k, value = -1, float("nan")
            if k == -1 or not 0.0 <= value <= 1.0:
                raise ConfigError(
                    f"fail_below = {self.fail_below!r}: expected [column=value:]k:threshold, e.g. 10:0.25 or model=v2:10:0.25"
                )
            if k not in self.options.cutoffs:
                raise ConfigError(f"fail_below names k = {k_text.strip()}, which is not among the cutoffs computed")
            gates.append((self._segment_filter(where), k, value))
        return gates

    def _segment_filter(self, where: str) -> Tuple[Tuple[str, str], ...]:
        """``model=v2&country=kr`` as (column, value) pairs, each column one of group_by."""
        pairs = []
        for condition in filter(None, (c.strip() for c in where.split("&"))):
            column, sep, value = condition.partition("=")
            if not sep or not column.strip():
                raise ConfigError(f"fail_below segment {condition!r} must look like column=value")
            if column.strip() not in self.options.group_by:
                raise ConfigError(f"fail_below segment {condition!r}: {column.strip()} is not a group_by column")
            pairs.append((column.strip(), value.strip()))
        return tuple(pairs)

    @classmethod
    def from_mapping(cls, values: Dict[str, Any]) -> JobConfig:
        """The config from TOML/flag values (config spellings accepted), unknown keys refused."""
        job_keys = [f.name for f in dataclasses.fields(cls) if f.name != "options"]
        option_keys = list(EvaluationOptions.names())
        check_known_keys(values, job_keys + option_keys, "config key")
        job = {k: v for k, v in values.items() if k in job_keys}
        if isinstance(job.get("report"), str):
            job["report"] = parse_bool(job["report"], "report")
        opts = EvaluationOptions(**{k: option_value(k, v) for k, v in values.items() if k in option_keys})
        missing = [k for k in ("recommendations", "relevance", "output") if k not in job]
        if missing:
            raise ConfigError(
                f"{missing[0]} is required (a path or a catalog table); set it in the config or as --{missing[0]}"
            )
        return cls(options=opts, **job)

    def to_dict(self) -> Dict[str, Any]:
        """The settings as the manifest records them (config spellings: ``k = ["5", "all"]``)."""
        settings = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "options"}
        options = dataclasses.asdict(self.options)
        options["k"] = [k if k is not None else k_label(k) for k in self.options.cutoffs]
        return {**settings, **options}


# ----------------------------------------------------------------------------- config spellings


def parse_cutoff(text: Any) -> Cutoff:
    """One cutoff as written in a config or a flag: a positive integer, or ``"all"`` (None)."""
    if isinstance(text, str):
        if text.strip().lower() == WHOLE_LIST:
            return None
        if not text.strip().lstrip("+").isdigit():
            raise ConfigError(f"k must hold positive integers or '{WHOLE_LIST}', got {text!r}")
        text = int(text)
    if isinstance(text, bool) or not isinstance(text, int) or text < 1:
        raise ConfigError(f"k must hold positive integers or '{WHOLE_LIST}', got {text!r}")
    return text


def option_value(name: str, value: Any) -> Any:
    """An option's value as written in TOML or a flag, as :class:`EvaluationOptions` takes it."""
    kind = {f.name: f.type for f in dataclasses.fields(EvaluationOptions)}[name]
    if name == "k":
        items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else [value]
        return tuple(parse_cutoff(item) for item in items)
    if name == "group_by" and isinstance(value, str):
        return tuple(n.strip() for n in value.split(",") if n.strip())
    if name == "group_by" and isinstance(value, list):
        return tuple(value)
    if not isinstance(value, str):
        return value
    if kind in ("bool", bool):
        return parse_bool(value, name)
    if kind in ("int", int) and value.strip().lstrip("-").isdigit():
        return int(value)
    if name == "relevance_threshold":
        try:
            return float(value)
        except ValueError:
            raise ConfigError(f"relevance_threshold must be a number, got {value!r}") from None
    return value


def parse_bool(text: str, name: str = "value") -> bool:
    """``true``/``false`` (and yes/no, on/off, 1/0) as a bool."""
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {text!r}")


def load_toml(path: str) -> Dict[str, Any]:
    """A config file's keys; ``./x`` and ``../x`` paths made relative to the file itself."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    # Any other value is left as it is: a bare name may be a catalog table, as on the command line.
    base = os.path.dirname(os.path.abspath(path))
    for key in PATH_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value.startswith(("./", "../")):
            data[key] = os.path.normpath(os.path.join(base, value))
    return data


# ----------------------------------------------------------------------------- flags


def build_parser(compare: bool = False) -> argparse.ArgumentParser:
    """The command line: the job's own flags, then one flag per evaluation option."""
    parser = argparse.ArgumentParser(
        prog="ndcg-spark compare" if compare else "ndcg-spark",
        description=(
            "Paired comparison of two models' NDCG@k: means, mean difference with its 95% interval, "
            "paired t-test p-value, wins/ties/losses."
            if compare
            else "Per-user and mean NDCG@k of recommendations against graded relevance, on Spark. "
            "'ndcg-spark compare --help' compares two models."
        ),
    )
    if compare:
        parser.add_argument("--baseline", dest="recommendations", help="Path or table of the baseline model.")
        parser.add_argument("--candidate", help="Path or table of the candidate model.")
        parser.add_argument(
            "--model-col", dest="model_col", help="Or: one table (--recommendations) with this model column..."
        )
        parser.add_argument("--baseline-model", dest="baseline_model", help="...this value for the baseline...")
        parser.add_argument("--candidate-model", dest="candidate_model", help="...and this one for the candidate.")
    parser.add_argument("--config", help="TOML file with any of the options below; flags override it.")
    parser.add_argument("--recommendations", help="Path or catalog table of the recommendations.")
    parser.add_argument("--relevance", help="Path or catalog table of the relevance judgements.")
    parser.add_argument("--format", help=f"Input format of paths: {', '.join(FORMATS)} (default parquet).")
    parser.add_argument("--output", help="Output directory (per_user/, summary/, summary.json).")
    parser.add_argument("--master", help="Spark master when not launched by spark-submit (default local[*]).")
    parser.add_argument(
        "--run-date", dest="run_date", help="Write under run_date=YYYY-MM-DD, replacing only that partition."
    )
    parser.add_argument("--partition", help="Write under key=value, replacing only that partition.")
    parser.add_argument(
        "--fail-below",
        dest="fail_below",
        help="Quality gate [column=value:]k:threshold[,...]: exit 4 (after writing) when the mean NDCG@k "
        "of any segment (or of those matching column=value) is below.",
    )
    parser.add_argument(
        "--user-attributes",
        dest="user_attributes",
        help="Path or table with one row per user and segment columns for group_by.",
    )
    parser.add_argument(
        "--remote", help="Spark Connect URL, e.g. sc://host:15002/;token=... (instead of a local Spark)."
    )
    parser.add_argument("--report", metavar="true|false", help="Write DIR/report.html (default true).")
    parser.add_argument("--verbose", action="store_true", help="Print Spark's stack trace on errors.")
    for f in dataclasses.fields(EvaluationOptions):
        flag = "--" + f.name.replace("_", "-")
        default = WHOLE_LIST if f.name == "k" else _shown(f.default)
        # argparse %-formats help strings: a literal % (as in "95% interval") must be doubled.
        help_text = (f.metadata["help"] + f" (default: {default})").replace("%", "%%")
        metavar = "true|false" if f.type in (bool, "bool") else None
        parser.add_argument(flag, dest=f.name, metavar=metavar, help=help_text)
    return parser


def _shown(default: Any) -> str:
    if default is None or default == ():
        return "none"
    return str(default).lower() if isinstance(default, bool) else str(default)


def parse_config(argv: Sequence[str], compare: bool = False) -> Tuple[JobConfig, bool]:
    """(config, verbose) from the TOML file named by ``--config`` with the flags laid over it."""
    parser = build_parser(compare)
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:
        if exc.code == 0:  # --help: argparse printed it; the command ends there, successfully
            raise
        # argparse already printed its one-line reason
        raise ConfigError("invalid command line (see the message above)") from exc
    values: Dict[str, Any] = {}
    if args.config:
        values.update(load_toml(args.config))
    values.update({k: v for k, v in vars(args).items() if k not in ("config", "verbose") and v is not None})
    config = JobConfig.from_mapping(values)
    if compare:
        by_model = [config.model_col, config.baseline_model, config.candidate_model]
        if config.candidate and any(by_model):
            raise ConfigError("give --candidate, or --model-col with --baseline-model and --candidate-model, not both")
        if not config.candidate and not all(by_model):
            raise ConfigError("compare needs --candidate, or --model-col with --baseline-model and --candidate-model")
    return config, args.verbose
