"""The evaluation job: config (TOML + flags) -> read -> evaluate -> write.

The job is a house with rooms, its dependencies running one way (``tests/test_layout.py``):

* :mod:`~ndcg_spark.job.config`: pure parsing, no Spark: every setting declared once
  (:mod:`~ndcg_spark.job.config.settings`), how a value is read, the flags and the TOML file,
  where a run writes (:mod:`~ndcg_spark.job.config.targets`), the gates as written and the typed
  config of each command (:mod:`~ndcg_spark.job.config.parsing`);
* :mod:`~ndcg_spark.job.result`: a run's result as one typed value (its JSON is the manifest),
  what each gate held and the gates' summary;
* :mod:`~ndcg_spark.job.gates`: the gates held against rows, their wording, the regression gate;
* :mod:`~ndcg_spark.job.outputs`: the sink contract and each kind of output (a directory, a
  family of catalog tables), chosen in one place (:mod:`~ndcg_spark.job.outputs.kinds`);
* :mod:`~ndcg_spark.job.commands`: the run protocol, then ``evaluate``, ``compare``,
  ``validate``, ``history`` and MLflow tracking;
* at the root, :mod:`~ndcg_spark.job.cli` (the entry point), the console, the progress lines,
  the signals and :mod:`~ndcg_spark.job.exits` (one table from an error's condition to its code).
"""

from ndcg_spark.job.cli import entrypoint, run
from ndcg_spark.job.commands.compare import main as compare_main
from ndcg_spark.job.commands.evaluate import main
from ndcg_spark.job.config.flags import load_toml
from ndcg_spark.job.config.parsing import CompareConfig, EvaluateConfig, parse_config
from ndcg_spark.job.result import RunResult

__all__ = [
    "CompareConfig",
    "EvaluateConfig",
    "RunResult",
    "compare_main",
    "entrypoint",
    "load_toml",
    "main",
    "parse_config",
    "run",
]
