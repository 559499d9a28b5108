"""The job's configuration: the TOML file and the flags, read once into a :class:`JobConfig`.

This is the boundary where config spellings become Python values: ``k = "5,10,all"`` becomes
``(5, 10, None)``, ``group_by = "model,country"`` a tuple, ``--companion-metrics true`` a bool.
Past it, one :class:`~ndcg_spark.EvaluationOptions` travels as itself.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import difflib
import math
import os
import tomllib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ndcg_spark._stats import CORRECTIONS
from ndcg_spark.compare import PAIRINGS
from ndcg_spark.errors import ConfigError
from ndcg_spark.options import WHOLE_LIST, Cutoff, EvaluationOptions, check_known_keys, k_label
from ndcg_spark.reading import FORMATS, ROLES

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
    # `ndcg-spark compare` only: the candidate table or tables (the baseline is `recommendations`),
    # or a model column with the model names when all live in `recommendations`.
    candidate: Optional[Any] = None
    model_col: Optional[str] = None
    baseline_model: Optional[str] = None
    candidate_model: Optional[str] = None
    # A format and a schema per input table; a format left out is `format`. The candidate of
    # `compare` is read as the recommendations are.
    recommendations_format: Optional[str] = None
    relevance_format: Optional[str] = None
    user_attributes_format: Optional[str] = None
    recommendations_schema: Optional[str] = None
    relevance_schema: Optional[str] = None
    user_attributes_schema: Optional[str] = None
    # `ndcg-spark compare`: which pairs, and the correction of their p-values.
    pairs: str = "baseline"
    correction: str = "holm"
    options: EvaluationOptions = field(default_factory=EvaluationOptions)

    def __post_init__(self) -> None:
        for name in ("format", *(f"{role}_format" for role in ROLES)):
            value = getattr(self, name)
            if value is not None and value not in FORMATS:
                raise ConfigError(f"{name} = {value!r} is not one of {', '.join(FORMATS)}")
        for name, choices in (("pairs", PAIRINGS), ("correction", CORRECTIONS)):
            if getattr(self, name) not in choices:
                raise ConfigError(f"{name} = {getattr(self, name)!r} is not one of {', '.join(choices)}")
        if self.user_attributes and self.input_format("user_attributes") == "trec":
            raise ConfigError("user attributes cannot be read as trec; set user_attributes_format")
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

    def input_format(self, role: str) -> str:
        """The format of one input table (``recommendations``, ``relevance``, ``user_attributes``)."""
        return getattr(self, f"{role}_format") or self.format

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
    def candidates(self) -> Tuple[str, ...]:
        """The candidate tables of ``compare`` (``candidate`` is one path or a list of them)."""
        values = [self.candidate] if isinstance(self.candidate, str) else list(self.candidate or ())
        if any(not isinstance(v, str) or not v.strip() for v in values):
            raise ConfigError(f"candidate must be a path or table, or a list of them, got {self.candidate!r}")
        return tuple(values)

    @property
    def candidate_models(self) -> Tuple[str, ...]:
        """The candidate model names of ``compare --model-col`` ("v2,v3"), empty for all others."""
        return tuple(n.strip() for n in str(self.candidate_model or "").split(",") if n.strip())

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
        # JSON keys are strings: the map of grade to gain as {"2": 5.0}, as written in TOML.
        options["gains"] = {_number_text(grade): gain for grade, gain in self.options.gains}
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
    if name == "gains":
        return parse_gains(value)
    if name == "log_base" and isinstance(value, str):
        return parse_log_base(value)
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


def parse_gains(value: Any) -> Tuple[Tuple[float, float], ...]:
    """The map of grade to gain: a TOML table ``{0 = 0, 2 = 5}`` (keys are strings there) or a flag
    ``"0:0,2:5"`` (``=`` also accepted, as trec_eval's ``ndcg.2=5``).

    Examples
    --------
    >>> parse_gains("0:0, 2=5")
    ((0.0, 0.0), (2.0, 5.0))
    >>> parse_gains({"1": 3, "2": 9.5})
    ((1.0, 3.0), (2.0, 9.5))
    """
    if isinstance(value, str):
        items = [part.replace("=", ":").split(":") for part in value.split(",") if part.strip()]
    elif isinstance(value, dict):
        items = [[key, gain] for key, gain in value.items()]
    else:
        raise ConfigError(f"gains must be a table of grade = gain, e.g. {{0 = 0, 1 = 1, 2 = 5}}, got {value!r}")
    pairs = []
    for item in items:
        try:
            if len(item) != 2 or isinstance(item[1], bool):
                raise ValueError
            pairs.append((float(str(item[0]).strip()), float(str(item[1]).strip())))
        except ValueError:
            raise ConfigError(f"gains must map grades to gains, e.g. 0:0,1:1,2:5; got {value!r}") from None
    return tuple(sorted(pairs))


def parse_log_base(text: str) -> float:
    """A logarithm's base as written in a flag: a number, or ``e``."""
    if text.strip().lower() == "e":
        return math.e
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"log_base must be a number above 1 (or e), got {text!r}") from None


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


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
        elif isinstance(value, list):  # compare's candidate tables
            data[key] = [
                os.path.normpath(os.path.join(base, v)) if isinstance(v, str) and v.startswith(("./", "../")) else v
                for v in value
            ]
    return data


# ----------------------------------------------------------------------------- flags


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one-line :class:`ConfigError` (exit 2), not usage and a message."""

    def error(self, message: str):
        raise ConfigError(usage_error(message, list(self._option_string_actions)))


def usage_error(message: str, flags: Sequence[str]) -> str:
    """argparse's complaint in one line; an unknown flag gets the closest known one.

    Examples
    --------
    >>> usage_error("unrecognized arguments: --gian exponential", ["--gain", "--k"])
    'unrecognized argument --gian (did you mean --gain?)'
    """
    prefix = "unrecognized arguments: "
    if not message.startswith(prefix):
        return message.replace("\n", " ")
    unknown = message[len(prefix) :].split()
    first = next((a for a in unknown if a.startswith("-")), unknown[0] if unknown else "")
    close = difflib.get_close_matches(first.split("=")[0], [f for f in flags if f.startswith("--")], n=1)
    return f"unrecognized argument {first}" + (f" (did you mean {close[0]}?)" if close else "")


def version_text() -> str:
    """What ``--version`` prints: this package's version and PySpark's."""
    import pyspark

    from ndcg_spark import __version__

    return f"ndcg-spark {__version__} (PySpark {pyspark.__version__})"


def build_parser(compare: bool = False) -> argparse.ArgumentParser:
    """The command line: the job's own flags, then one flag per evaluation option."""
    parser = OneLineParser(
        prog="ndcg-spark compare" if compare else "ndcg-spark",
        description=(
            "Paired comparison of models' NDCG@k, against a baseline or every pair: means, mean difference "
            "with its 95% interval, paired t-test p-value (and corrected across the pairs), wins/ties/losses."
            if compare
            else "Per-user and mean NDCG@k of recommendations against graded relevance, on Spark. "
            "'ndcg-spark compare --help' compares models."
        ),
    )
    if compare:
        parser.add_argument("--baseline", dest="recommendations", help="Path or table of the baseline model.")
        parser.add_argument(
            "--candidate", action="append", help="Path or table of a candidate model (repeat for more)."
        )
        parser.add_argument(
            "--model-col", dest="model_col", help="Or: one table (--recommendations) with this model column..."
        )
        parser.add_argument("--baseline-model", dest="baseline_model", help="...this value for the baseline...")
        parser.add_argument(
            "--candidate-model",
            dest="candidate_model",
            help="...and these for the candidates (v2[,v3...]; default: every other value).",
        )
        parser.add_argument(
            "--pairs", help="'baseline': each candidate against the baseline (default); 'all': every pair of models."
        )
        parser.add_argument(
            "--correction",
            help="Multiple-testing correction of the p-values across the pairs: holm (default) or bonferroni.",
        )
    parser.add_argument("--version", action="version", version=version_text(), help="Print the versions and exit.")
    parser.add_argument("--config", help="TOML file with any of the options below; flags override it.")
    parser.add_argument("--recommendations", help="Path or catalog table of the recommendations.")
    parser.add_argument("--relevance", help="Path or catalog table of the relevance judgements.")
    parser.add_argument("--format", help=f"Input format of paths: {', '.join(FORMATS)} (default: parquet).")
    for role in ROLES:
        flag, table = role.replace("_", "-"), role.replace("_", " ")
        parser.add_argument(
            f"--{flag}-format", dest=f"{role}_format", help=f"Format of the {table} (default: --format)."
        )
        parser.add_argument(
            f"--{flag}-schema",
            dest=f"{role}_schema",
            help=f"Column types of the {table}, e.g. 'user_id string, score double' (default: keys as stored; "
            "CSV and JSON keys as strings).",
        )
    parser.add_argument("--output", help="Output directory (per_user/, summary/, summary.json).")
    parser.add_argument("--master", help="Spark master when not launched by spark-submit (default: local[*]).")
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
    parser.add_argument("--report", metavar="true|false", help="Write DIR/report.html (default: true).")
    parser.add_argument(
        "--verbose", action="store_true", help="Print Spark's stack trace on errors, and library warnings."
    )
    for f in dataclasses.fields(EvaluationOptions):
        flag = "--" + f.name.replace("_", "-")
        default = WHOLE_LIST if f.name == "k" else _shown(f.default)
        # argparse %-formats help strings: a literal % (as in "95% interval") must be doubled.
        help_text = f.metadata["help"]
        if "(default" not in help_text:  # some helps say what their unset default means
            help_text += f" (default: {default})"
        help_text = help_text.replace("%", "%%")
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
    # --help and --version print and raise SystemExit(0); errors raise ConfigError (OneLineParser).
    args = parser.parse_args(list(argv))
    values: Dict[str, Any] = {}
    if args.config:
        values.update(load_toml(args.config))
    values.update({k: v for k, v in vars(args).items() if k not in ("config", "verbose") and v is not None})
    config = JobConfig.from_mapping(values)
    if compare:
        by_model = [config.model_col, config.baseline_model, config.candidate_model]
        if config.candidates and any(by_model):
            raise ConfigError("give --candidate, or --model-col with --baseline-model and --candidate-model, not both")
        if not config.candidates and not config.model_col:
            raise ConfigError("compare needs --candidate, or --model-col with --baseline-model and --candidate-model")
        if config.model_col and not config.baseline_model and config.pairs == "baseline":
            raise ConfigError("compare --model-col needs --baseline-model (or --pairs all)")
    return config, args.verbose
