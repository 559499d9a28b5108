"""How a setting's value as written (a TOML value, or a flag's text) becomes its typed value.

Each reader is ``(value, name) -> typed value`` and raises a one-line ConfigError naming the
setting; :mod:`ndcg_spark.job.config.settings` names the reader of each setting.
"""

from __future__ import annotations

import math
from typing import Any, Tuple

from ndcg_spark.errors import ConfigError
from ndcg_spark.job.config.targets import FORCE
from ndcg_spark.options import parse_cutoff


def text(value: Any, name: str) -> str:
    """A string as written (a path, a table, a name)."""
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, got {value!r}")
    return value


def name_or_uri(value: Any, name: str) -> str:
    """A name or URI, stripped (checked by :class:`~ndcg_spark.job.config.targets.MlflowTarget`)."""
    return value.strip() if isinstance(value, str) and value.strip() else value


def parse_bool(value: Any, name: str = "value") -> bool:
    """``true``/``false`` (and yes/no, on/off, 1/0) as a bool; a TOML boolean as itself."""
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower() if isinstance(value, str) else None
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def whole(value: Any, name: str) -> Any:
    """An integer; digits as text count as the integer (anything else is left for the
    option's own check to refuse in its words)."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def number(value: Any, name: str) -> float:
    """A number (an int or float in TOML, its text as a flag)."""
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number, got {value!r}") from None


def seconds(value: Any, name: str) -> float:
    """A number of seconds (its range checked by :class:`~ndcg_spark.job.config.targets.Output`)."""
    try:
        return number(value, name)
    except ConfigError:
        raise ConfigError(f"{name} must be a number of seconds, got {value!r}") from None


def log_base(value: Any, name: str) -> float:
    """A logarithm's base: a number, or ``e``."""
    if isinstance(value, str) and value.strip().lower() == "e":
        return math.e
    try:
        return number(value, name)
    except ConfigError:
        raise ConfigError(f"log_base must be a number above 1 (or e), got {value!r}") from None


def cutoffs(value: Any, name: str = "k") -> Tuple[Any, ...]:
    """Cutoffs as written: ``"5,10,all"``, a TOML list or one value; each an int, or None for ``all``.

    Examples
    --------
    >>> cutoffs("5, 10,all"), cutoffs([20, "all"]), cutoffs(3)
    ((5, 10, None), (20, None), (3,))
    """
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else [value]
    return tuple(parse_cutoff(item) for item in items)


def names(value: Any, name: str) -> Tuple[str, ...]:
    """Names as ``"a,b"`` or a TOML list (their own check is the option's)."""
    if isinstance(value, str):
        return tuple(n.strip() for n in value.split(",") if n.strip())
    return tuple(value) if isinstance(value, (list, tuple)) else value


def beyond_names(value: Any, name: str = "beyond_accuracy") -> Any:
    """``beyond_accuracy`` as written: ``true``/``false``, a flag's ``"novelty,diversity"`` (any
    case) or a TOML list, as True, False or a list of names (their own check is the option's:
    :class:`~ndcg_spark.options.EvaluationOptions` refuses an unknown name).

    Examples
    --------
    >>> beyond_names("True"), beyond_names(" Novelty, catalog_coverage"), beyond_names(["novelty"])
    (True, ['novelty', 'catalog_coverage'], ['novelty'])
    """
    if not isinstance(value, str):
        return value
    text = value.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    return [v.strip() for v in text.split(",") if v.strip()]


def texts(value: Any, name: str) -> Tuple[str, ...]:
    """One path or table, or a list of them (``candidate``; repeatable as a flag)."""
    items = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else [value]
    if any(not isinstance(v, str) or not v.strip() for v in items):
        raise ConfigError(f"{name} must be a path or table, or a list of them, got {value!r}")
    return tuple(items)


def gate_text(value: Any, name: str) -> str:
    """Gates as written, a string or a TOML list of them, as one string (parsed into gates by
    the config, which knows the cutoffs and segments they may name)."""
    return ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)


def parse_gains(value: Any, name: str = "gains") -> Tuple[Tuple[float, float], ...]:
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


def break_lock(value: Any, name: str) -> Any:
    """False, True (a stalled lease) or ``"force"`` (any lock)."""
    if isinstance(value, str) and value.strip().lower() == FORCE:
        return FORCE
    return parse_bool(value, name)


def trend_runs(value: Any, name: str) -> int:
    value = whole(value, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"trend_runs must be a whole number of runs (0: no trend chart), got {value!r}")
    return value


def positive(value: Any, name: str) -> int:
    if not str(value).strip().isdigit() or int(value) < 1:
        raise ConfigError(f"must be a positive whole number, got {value!r}")
    return int(value)


def number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)
