"""The spellings of the settings: the TOML file and the command line, built from the one
declaration of :mod:`ndcg_spark.job.config.settings`.

:mod:`ndcg_spark.job.config.parsing` reads the values once into the typed config of each command.
"""

from __future__ import annotations

import argparse
import difflib
import os
import tomllib
from typing import Any, Dict, Optional, Sequence

from ndcg_spark.errors import ConfigError
from ndcg_spark.job.config.settings import COMPARE, EVALUATE, HISTORY, Setting, settings_of

#: Config keys holding paths: written ./x or ../x in a file, they are relative to the file.
PATH_KEYS = (
    "recommendations",
    "relevance",
    "output",
    "user_attributes",
    "candidate",
    "interactions",
    "items",
    "baseline_recommendations",
)

DESCRIPTIONS = {
    EVALUATE: "Per-user and mean NDCG@k of recommendations against graded relevance, on Spark. "
    "'ndcg-spark compare --help' compares models; 'ndcg-spark history --help' shows an output's dated runs; "
    "'ndcg-spark validate [flags]' checks the inputs, writing nothing.",
    COMPARE: "Paired comparison of models' NDCG@k, against a baseline or every pair: means, mean difference "
    "with its 95% interval, paired t-test p-value (and corrected across the pairs), wins/ties/losses.",
    HISTORY: "The figures of every complete run in an output (dated or partitioned runs of ndcg-spark), "
    "oldest first, read from the runs' manifests only.",
    "validate": "Checks the inputs as a run with the same flags would read them: every problem of the rows, "
    "with its count and example keys (exit 3), or the row accounting (exit 0). Writes nothing.",
}


def load_toml(path: str) -> Dict[str, Any]:
    """A config file's keys; ``./x`` and ``../x`` paths made relative to the file itself."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        hint = ""
        if "overwrite" in str(exc).lower():
            # ``spark.sql.catalog.lake = "..."`` then ``spark.sql.catalog.lake.type = "..."``: the
            # second makes the first's value a table. Spark's names for a catalog and its options.
            hint = '; a key that another key extends must be quoted: "spark.sql.catalog.lake" = "..."'
        raise ConfigError(f"config file {path} is not valid TOML: {exc}{hint}") from None
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


def build_parser(command: str = EVALUATE, shown: Optional[str] = None) -> argparse.ArgumentParser:
    """The command line of ``command`` (``evaluate``, ``compare`` or ``history``): one flag per
    setting that applies to it (:func:`~ndcg_spark.job.config.settings.settings_of`), named in its usage
    and ``--help`` as ``shown`` (``validate`` takes evaluate's flags).

    A TOML key's flag is left as text (None when not given), read with the file's values by
    :func:`~ndcg_spark.job.config.settings.parse_values`; a flag with no TOML key is read by argparse.
    """
    name = shown or command
    prog = "ndcg-spark" if name == EVALUATE else f"ndcg-spark {name}"
    parser = OneLineParser(prog=prog, description=DESCRIPTIONS[name])
    if command != HISTORY:
        parser.add_argument("--version", action="version", version=version_text(), help="Print the versions and exit.")
    for setting in settings_of(command):
        extra: Dict[str, Any] = dict(setting.argument)
        if not setting.toml and "action" not in extra:
            extra["type"] = _typed(setting)
        if not setting.toml and "store" in str(extra.get("action", "")):
            extra["default"] = setting.default
        # argparse %-formats help strings: a literal % (as in "95% interval") must be doubled.
        help_text = setting.help_for(command).replace("%", "%%")
        parser.add_argument(*setting.flags_for(command), dest=setting.name, help=help_text, **extra)
    return parser


def _typed(setting: Setting):
    """argparse's ``type`` for a flag it reads itself: the setting's reader, its error in argparse's words."""

    def read(text: str) -> Any:
        try:
            return setting.parse(text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return read
