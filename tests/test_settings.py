"""The job's settings are declared once (ndcg_spark/job/config/settings.py): a setting's TOML key, flag,
--help line, manifest entry and MLflow param all come from its declaration, and each value is read
once, at the boundary, into its typed value. The manifest is a versioned record. No Spark here."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ndcg_spark.errors import ConfigError, InputDataError
from ndcg_spark.job import CompareConfig, EvaluateConfig, parse_config
from ndcg_spark.job.commands import tracking
from ndcg_spark.job.config import settings, spellings
from ndcg_spark.job.config.flags import build_parser
from ndcg_spark.job.config.parsing import HistoryConfig
from ndcg_spark.job.config.targets import Partition
from ndcg_spark.job.result import RunResult

pytestmark = pytest.mark.job

REQUIRED = ["--recommendations", "r/", "--relevance", "g/", "--output", "o/"]


def help_text(command: str) -> str:
    return " ".join(build_parser(command).format_help().split())


@pytest.fixture
def new_setting(monkeypatch):
    """A setting nobody has yet, declared as one more entry of the job's settings."""
    added = settings.Setting("night_label", "A label for tonight's run, e.g. canary.", commands=(settings.EVALUATE,))
    monkeypatch.setattr(settings, "SETTINGS", (*settings.SETTINGS, added))
    monkeypatch.setattr(settings, "BY_NAME", {**settings.BY_NAME, added.name: added})
    return added


def test_a_new_setting_is_one_declaration_away_from_the_toml_the_flag_the_help_and_the_manifest(new_setting, tmp_path):
    assert "night_label" in EvaluateConfig.keys() and "night_label" not in CompareConfig.keys()
    assert "--night-label NIGHT_LABEL A label for tonight's run, e.g. canary." in help_text("evaluate")
    (tmp_path / "job.toml").write_text('night_label = "from-toml"\n')
    from_toml, _ = parse_config([*REQUIRED, "--config", str(tmp_path / "job.toml")])
    assert from_toml.to_dict()["night_label"] == "from-toml"
    from_flag, _ = parse_config([*REQUIRED, "--config", str(tmp_path / "job.toml"), "--night-label", "canary"])
    assert from_flag.to_dict()["night_label"] == "canary"  # the flag over the file
    result = RunResult("evaluate", from_flag.to_dict())
    assert ("night_label", "canary") in tracking.param_rows(result)
    unset, _ = parse_config(REQUIRED)
    assert unset.to_dict()["night_label"] is None
    with pytest.raises(ConfigError, match="unrecognized argument --night-label"):
        parse_config(["--baseline", "b/", "--candidate", "c/", "--relevance", "g/", "--night-label", "x"], True)


def test_a_value_is_read_once_into_its_type(monkeypatch):
    calls = []

    def counted(value, name):
        calls.append(value)
        return spellings.cutoffs(value, name)

    monkeypatch.setitem(settings.BY_NAME, "k", dataclasses.replace(settings.BY_NAME["k"], read=counted))
    config, _ = parse_config([*REQUIRED, "--k", "10,5,all", "--fail-below", "10:0.3", "--run-date", "2026-11-21"])
    assert calls == ["10,5,all"]
    assert config.options.k == (5, 10, None) and config.gates[0].k == 10
    assert config.output.partition == Partition("run_date", "2026-11-21")
    # The manifest keeps the ints as ints ("all" is the whole list's spelling).
    assert json.loads(json.dumps(config.to_dict()))["k"] == [5, 10, "all"]


@pytest.mark.parametrize("command", ["evaluate", "compare", "history"])
def test_every_setting_of_a_command_has_its_flag_and_help(command):
    text = help_text(command)
    for setting in settings.settings_of(command):
        for flag in setting.flags_for(command):
            assert flag in text, flag
        assert " ".join(setting.help_for(command).split()[:4]) in text, setting.name


def test_the_manifest_records_every_recorded_setting_and_no_other():
    config, _ = parse_config([*REQUIRED, "--quiet", "--break-lock", "--lock-timeout", "60"])
    recorded = {s.name for s in settings.settings_of("evaluate") if s.record is not None}
    assert set(config.to_dict()) == recorded
    assert {"quiet", "verbose", "config", "break_lock", "lock_timeout"}.isdisjoint(recorded)
    assert config.quiet is True and config.output.break_lock is True and config.output.lock_timeout == 60.0
    assert tracking.PRIVATE_SETTINGS == ("remote",)


def test_toml_values_and_flag_text_read_alike(tmp_path):
    (tmp_path / "job.toml").write_text(
        'k = [5, "all"]\nreport = false\nlock_timeout = 30\ntrend_runs = 3\nrun_date = "2026-11-21"\n'
        'gains = {0 = 0, 2 = 5}\n[spark]\n"spark.sql.shuffle.partitions" = 8\n'
    )
    from_file, _ = parse_config([*REQUIRED, "--config", str(tmp_path / "job.toml")])
    argv = ["--k", "5,all", "--report", "false", "--lock-timeout", "30", "--trend-runs", "3"]
    argv += ["--run-date", "2026-11-21", "--gains", "0:0,2:5", "--conf", "spark.sql.shuffle.partitions=8"]
    from_flags, _ = parse_config([*REQUIRED, *argv])
    assert from_file == from_flags and from_file.to_dict() == from_flags.to_dict()
    assert from_file.spark == (("spark.sql.shuffle.partitions", "8"),) and from_file.trend_runs == 3


def test_history_reads_its_flags_from_the_same_declarations():
    config, verbose = HistoryConfig.parse(["--output", "o/", "--last", "2", "--json", "--conf", "a.b=c", "--verbose"])
    assert (config.last, config.as_json, config.spark, verbose) == (2, True, (("a.b", "c"),), True)
    with pytest.raises(ConfigError, match="argument --last: must be a positive whole number, got '0'"):
        HistoryConfig.parse(["--output", "o/", "--last", "0"])


def test_a_manifest_records_its_version_and_command():
    written = RunResult("compare", {"k": [10]}).to_json()
    assert (written["schema_version"], written["command"]) == (1, "compare")
    assert RunResult.from_json(written).command == "compare"


def test_a_version_1_manifest_without_the_key_reads_and_a_later_one_is_refused():
    # The released format's first markers: no schema_version, no command.
    first = {"metrics": [{"k": 10, "mean_ndcg": 0.5}], "quality_gates": [], "settings": {"k": [10]}}
    result = RunResult.from_json(first, "evaluate")
    assert (result.schema_version, result.command, result.metrics) == (1, "evaluate", ({"k": 10, "mean_ndcg": 0.5},))
    assert RunResult.from_json({"comparison": [], "settings": {}}, "compare").command == "compare"
    with pytest.raises(InputDataError, match="manifest schema_version 2 is not one this ndcg-spark reads"):
        RunResult.from_json({**first, "schema_version": 2})


def test_the_config_depends_on_nothing_that_runs_the_job():
    """The config package imports only the library and itself (the rule of tests/test_layout.py,
    asked here of the settings' home), and the outputs never import the commands' configs."""
    from tests.test_layout import job_graph

    graph = job_graph()
    config = {m: deps for m, deps in graph.items() if m.startswith("ndcg_spark.job.config")}
    assert config and all(d.startswith("ndcg_spark.job.config") for deps in config.values() for d in deps)
    for module, deps in graph.items():
        if module.startswith("ndcg_spark.job.outputs"):
            assert "ndcg_spark.job.config.parsing" not in deps, module
