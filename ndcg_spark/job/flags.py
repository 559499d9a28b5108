"""Config spellings: the TOML file, the flags, and the text of each value as the job reads it.

:mod:`ndcg_spark.job.config` turns these values into the typed config of each command.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import os
import tomllib
from typing import Any, Dict, Sequence, Tuple

from ndcg_spark.errors import ConfigError
from ndcg_spark.options import WHOLE_LIST, EvaluationOptions, parse_cutoff
from ndcg_spark.reading import FORMATS, ROLES

#: Config keys holding paths: written ./x or ../x in a file, they are relative to the file.
PATH_KEYS = ("recommendations", "relevance", "output", "user_attributes", "candidate")


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


def number_text(value: float) -> str:
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
            "'ndcg-spark compare --help' compares models; 'ndcg-spark history --help' shows an output's dated runs; "
            "'ndcg-spark validate [flags]' checks the inputs, writing nothing."
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
        parser.add_argument(
            "--fail-if-worse",
            dest="fail_if_worse",
            help="Non-inferiority gate [column=value:]k:margin[,...]: exit 4 (after writing) when a candidate is "
            "worse than its baseline by more than margin with 95%% confidence (the interval of the paired "
            "difference lies below -margin). A filter may name a segment, baseline_model or candidate_model.",
        )
    parser.add_argument("--version", action="version", version=version_text(), help="Print the versions and exit.")
    parser.add_argument("--config", help="TOML file with any of the options below; flags override it.")
    parser.add_argument("--recommendations", help="Path or catalog table of the recommendations.")
    parser.add_argument("--relevance", help="Path or catalog table of the relevance judgements.")
    parser.add_argument("--format", help=f"Input format of paths: {', '.join(FORMATS)} (default: parquet).")
    examples = {
        "recommendations": "user_id int, item_id int, score double",
        "relevance": "user_id int, item_id int, relevance double",
        "user_attributes": "user_id int, country string",
    }
    for role in ROLES:
        flag, table = role.replace("_", "-"), role.replace("_", " ")
        parser.add_argument(
            f"--{flag}-format", dest=f"{role}_format", help=f"Format of the {table} (default: --format)."
        )
        parser.add_argument(
            f"--{flag}-schema",
            dest=f"{role}_schema",
            help=f"Column types of the {table}, e.g. '{examples[role]}' (default: keys as stored; "
            "CSV and JSON keys as strings).",
        )
    parser.add_argument("--output", help="Output directory (per_user/, summary/, summary.json).")
    parser.add_argument(
        "--output-table",
        dest="output_table",
        help="Or: a family of catalog tables, db.name (db.name_summary, db.name_per_user, db.name_runs, ...); "
        "needs --run-date or --partition (docs/job.md).",
    )
    parser.add_argument(
        "--output-table-format",
        dest="output_table_format",
        help="Format the output tables are created in: parquet, delta, iceberg (default: the catalog's).",
    )
    parser.add_argument("--master", help="Spark master when not launched by spark-submit (default: local[*]).")
    parser.add_argument(
        "--conf",
        dest="spark",
        action="append",
        metavar="KEY=VALUE",
        help="A Spark setting for the session the job starts (repeat for more; also the TOML table [spark]), "
        "e.g. spark.sql.catalogImplementation=hive.",
    )
    parser.add_argument(
        "--run-date",
        dest="run_date",
        help="Write under run_date=YYYY-MM-DD (that form only), replacing only that partition.",
    )
    parser.add_argument("--partition", help="Write under key=value, replacing only that partition.")
    parser.add_argument(
        "--break-lock",
        dest="break_lock",
        nargs="?",
        const=True,
        metavar="force",
        help="Also break a lock whose lease missed its renewals (a run stalled or gone on another host); a lock "
        "whose run is gone is broken without it. '--break-lock force' breaks a live run's lock too: two runs "
        "may then write one result at once (docs/job.md).",
    )
    parser.add_argument(
        "--lock-timeout",
        dest="lock_timeout",
        help="Seconds a run's lock may go without its lease renewed before the next run breaks it (default: 300).",
    )
    parser.add_argument(
        "--fail-below",
        dest="fail_below",
        help="Quality gate [column=value:]k:threshold[,...]: exit 4 (after writing) when the mean NDCG@k "
        "of any segment (or of those matching column=value) is below.",
    )
    if not compare:
        _regression_flags(parser)
    parser.add_argument(
        "--mlflow-experiment",
        dest="mlflow_experiment",
        help="Log the run to this MLflow experiment (created if missing) after publishing; needs ndcg-spark[mlflow].",
    )
    parser.add_argument(
        "--mlflow-tracking-uri",
        dest="mlflow_tracking_uri",
        help="MLflow tracking store (default: MLflow's own, MLFLOW_TRACKING_URI).",
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
    parser.add_argument("--quiet", action="store_true", help="No progress lines on stderr (also: NDCG_SPARK_QUIET=1).")
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


def _regression_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of the regression gate and the trend chart (``ndcg-spark`` only)."""
    parser.add_argument(
        "--fail-if-drop",
        dest="fail_if_drop",
        help="Regression gate [column=value:]k:drop[,...], drop an NDCG difference (0.02) or a share of the "
        "previous mean (2%%): exit 4 (after writing) when mean NDCG@k fell by more than drop since the previous "
        "complete run of the output, over the users in both, and the 95%% interval of the paired difference lies "
        "below 0. Needs --run-date or --partition.",
    )
    parser.add_argument(
        "--drop-on-estimate",
        dest="drop_on_estimate",
        action="store_const",
        const=True,
        help="Fail --fail-if-drop on the mean difference alone, whatever its interval.",
    )
    parser.add_argument(
        "--drop-baseline",
        dest="drop_baseline",
        help="The run --fail-if-drop compares with: 'last' (default), the most recent earlier complete run, or "
        "'last_passed', the most recent earlier one whose gates all passed.",
    )
    parser.add_argument(
        "--trend-runs",
        dest="trend_runs",
        help="Complete runs on report.html's trend chart, tonight's included (default: 14; 0: no chart). "
        "Needs --run-date or --partition.",
    )


def build_history_parser() -> argparse.ArgumentParser:
    """The command line of ``ndcg-spark history``."""
    parser = OneLineParser(
        prog="ndcg-spark history",
        description="The figures of every complete run in an output (dated or partitioned runs of ndcg-spark), "
        "oldest first, read from the runs' manifests only.",
    )
    parser.add_argument("--output", help="The output directory of the runs.")
    parser.add_argument("--output-table", dest="output_table", help="Or: the family of catalog tables of the runs.")
    parser.add_argument("--conf", dest="spark", action="append", metavar="KEY=VALUE", help="A Spark setting.")
    parser.add_argument("--json", dest="as_json", action="store_true", help="Print one JSON document.")
    parser.add_argument("--last", type=_positive, help="Only the last N complete runs.")
    parser.add_argument("--master", help="Spark master when not launched by spark-submit (default: local[*]).")
    parser.add_argument("--remote", help="Spark Connect URL (instead of a local Spark).")
    parser.add_argument("--verbose", action="store_true", help="Print the stack trace on errors.")
    return parser


def _positive(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}")
    return int(text)


def _shown(default: Any) -> str:
    if default is None or default == ():
        return "none"
    return str(default).lower() if isinstance(default, bool) else str(default)
