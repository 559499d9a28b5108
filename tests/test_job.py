"""The job through its command line: config + flags, outputs, figures, errors and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from chispa import assert_approx_df_equality, assert_df_equality

from ndcg_spark import evaluate
from ndcg_spark.job import run
from ndcg_spark.job.commands.protocol import RUN_SETTINGS
from ndcg_spark.job.exits import EXIT_CONFIG, EXIT_INPUT, EXIT_OK
from tests.helpers import reference_ndcg, trec_expected, trec_tables

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)

ROOT = Path(__file__).resolve().parents[1]


def _write(df, path, fmt="parquet"):
    df.write.mode("overwrite").format(fmt).option("header", "true").save(str(path))
    return str(path)


def _manifest(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def suite_inputs(spark, tmp_path_factory):
    """Spark's RankingMetricsSuite graded case as Parquet files."""
    base = tmp_path_factory.mktemp("suite")
    preds = {1: [1, 6, 2, 7, 8, 3, 9, 10, 4, 5], 2: [4, 1, 5, 6, 2, 7, 3, 8, 9, 10], 3: [1, 2, 3, 4, 5]}
    recs = spark.createDataFrame(
        [(u, i, float(len(p) - r)) for u, p in preds.items() for r, i in enumerate(p)],
        "user_id int, item_id int, score double",
    )
    rel = spark.createDataFrame(
        [(1, 1, 3.0), (1, 2, 2.0), (1, 3, 1.0), (1, 4, 1.0), (1, 5, 1.0), (2, 1, 2.0), (2, 2, 0.0), (2, 3, 0.0)],
        "user_id int, item_id int, relevance double",
    )
    return _write(recs, base / "recs"), _write(rel, base / "rel"), recs, rel


def test_job_reproduces_ranking_metrics_suite(spark, suite_inputs, tmp_path, capsys):
    recs_path, rel_path, recs, rel = suite_inputs
    out = tmp_path / "out"
    code = run(
        [
            "--recommendations",
            recs_path,
            "--relevance",
            rel_path,
            "--output",
            str(out),
            "--k",
            "3,5,10",
            "--gain",
            "exponential",
        ]
    )
    assert code == EXIT_OK
    metrics = {m["k"]: m for m in _manifest(out)["metrics"]}
    assert metrics[3]["mean_ndcg"] == pytest.approx(0.511959, abs=1e-5)
    assert metrics[5]["mean_ndcg"] == pytest.approx(0.487806, abs=1e-5)
    assert metrics[10]["mean_ndcg"] == pytest.approx(0.518700, abs=1e-5)
    manifest = _manifest(out)
    assert manifest["input_rows"] == {"recommendations": 25, "relevance": 8}
    assert manifest["settings"]["gain"] == "exponential" and manifest["settings"]["k"] == [3, 5, 10]
    # The Parquet outputs are the library's frames.
    library = evaluate(recs, rel, k=[3, 5, 10], gain="exponential")
    assert_df_equality(
        spark.read.parquet(str(out / "per_user")).orderBy("user_id", "k"),
        library.per_user.orderBy("user_id", "k"),
        ignore_nullable=True,
    )
    # The summary's sums follow the partitioning (the job reads Parquet files, the library an
    # in-memory frame), so their last bits may differ (docs/conventions.md): equal to 1e-12.
    summary = spark.read.parquet(str(out / "summary")).orderBy("k")
    assert_approx_df_equality(summary, library.summary, 1e-12, ignore_nullable=True)
    printed = capsys.readouterr().out
    assert "mean_ndcg" in printed and "0.511960" in printed  # printed to 6 places


def test_job_reproduces_trec_eval(spark, data_dir, tmp_path):
    results, qrels = trec_tables(spark, data_dir)
    recs_path = _write(results.select("user_id", "item_id", "score"), tmp_path / "run")
    rel_path = _write(qrels.select("user_id", "item_id", "relevance"), tmp_path / "qrels")
    out = tmp_path / "out"
    code = run(
        [
            "--recommendations",
            recs_path,
            "--relevance",
            rel_path,
            "--output",
            str(out),
            "--k",
            "5,10,15,20,30,100,200,500,1000",
            "--tie-break",
            "item_descending",
        ]
    )
    assert code == EXIT_OK
    means = {m["k"]: m["mean_ndcg"] for m in _manifest(out)["metrics"]}
    expected = trec_expected(data_dir / "trec_eval" / "out.test.a", per_topic=False)
    assert len(expected) == 9
    for (_, k), value in expected.items():
        assert means[k] == pytest.approx(value, abs=5e-5), k


def test_config_paths_written_relative_are_relative_to_the_file(tmp_path):
    from ndcg_spark.job import load_toml

    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    config = conf_dir / "job.toml"
    config.write_text(
        'recommendations = "../data/recs"\nrelevance = "./rel"\noutput = "/abs/out"\n'
        'user_attributes = "../data/users"\ncandidate = "db.candidate"\n'
    )
    assert load_toml(str(config)) == {
        "recommendations": str(tmp_path / "data" / "recs"),
        "relevance": str(conf_dir / "rel"),
        "output": "/abs/out",
        "user_attributes": str(tmp_path / "data" / "users"),
        "candidate": "db.candidate",  # a catalog table: left as written
    }


@pytest.mark.parametrize(
    "argv, code, words",
    [
        (["--k", "0"], EXIT_CONFIG, "k must hold positive integers"),
        (["--gain", "cubic"], EXIT_CONFIG, "gain = 'cubic' is not one of linear, exponential"),
        (["--format", "xls"], EXIT_CONFIG, "format = 'xls' is not one of"),
        (["--zero-idcg", "nan"], EXIT_CONFIG, "zero_idcg = 'nan' is not one of zero, exclude"),
        (
            ["--partition", "model=v:2"],
            EXIT_CONFIG,
            "partition = 'model=v:2' holds characters not allowed in a partition: :",
        ),
        (["--partition", ".run=1"], EXIT_CONFIG, "a partition column may not start with '.' or '_'"),
        (["--partition", "k=run7"], EXIT_CONFIG, "partition column 'k' is also a column of the output"),
        (["--partition", "mean_ndcg=x"], EXIT_CONFIG, "partition column 'mean_ndcg' is also a column of the output"),
    ],
)
def test_bad_flags_exit_2_with_one_line(suite_inputs, tmp_path, capsys, argv, code, words):
    recs_path, rel_path, _, _ = suite_inputs
    out = tmp_path / "out"
    assert run(["--recommendations", recs_path, "--relevance", rel_path, "--output", str(out), *argv]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
    assert not out.exists()


@pytest.mark.parametrize("argv", [["--help"], ["compare", "--help"]])
def test_help_prints_every_option_and_exits_0(argv, capsys):
    # Help strings go through argparse's %-formatting: a literal "95%" must not make --help crash.
    assert run(argv) == EXIT_OK
    out, err = capsys.readouterr()
    assert "--confidence-interval" in out and "95% interval" in out and "--zero-idcg" in out
    assert err == ""


def test_unknown_config_key_suggests_the_nearest(tmp_path, capsys):
    config = tmp_path / "job.toml"
    config.write_text('recomendations = "x"\n')
    assert run(["--config", str(config)]) == EXIT_CONFIG
    assert "unknown config key 'recomendations'; did you mean 'recommendations'?" in capsys.readouterr().err


def test_missing_input_exits_3(tmp_path, capsys):
    out = tmp_path / "out"
    code = run(
        ["--recommendations", str(tmp_path / "nope"), "--relevance", str(tmp_path / "nope2"), "--output", str(out)]
    )
    assert code == EXIT_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot read recommendations" in err[0] and "does not exist" in err[0]
    assert not out.exists()


@pytest.mark.process
def test_readme_sample_command_end_to_end(tmp_path):
    """The README's first command, as a new user runs it: a fresh process with its own local Spark,
    whose progress lines reach stderr while it works, the first within its first seconds."""
    out = tmp_path / "sample"
    env = {k: v for k, v in os.environ.items() if k != "NDCG_SPARK_QUIET"}
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ndcg_spark", "--config", str(ROOT / "conf" / "sample.toml"), "--output", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
    )
    arrived = []  # (seconds since the start, line) as each stderr line came
    reader = threading.Thread(target=lambda: arrived.extend((time.monotonic() - started, ln) for ln in proc.stderr))
    reader.start()
    stdout = proc.stdout.read()  # stderr is the reader's alone
    proc.wait(300)
    ended = time.monotonic() - started
    reader.join(10)
    assert proc.returncode == 0, arrived
    progress = [(t, ln.rstrip("\n")) for t, ln in arrived if ln.startswith("ndcg-spark: [")]
    phases = [
        ln.split("] ", 1)[1] for _, ln in progress if " tasks done (stage" not in ln and "still working" not in ln
    ]
    assert phases == [
        "starting Spark",
        "reading the inputs",
        "evaluating and writing per_user",
        "writing summary",
        "writing report.html",
        "publishing",
    ], progress
    assert progress[0][0] < 5 and progress[1][0] < ended - 5, (progress, ended)
    _assert_readme_sample(stdout, out)


def test_readme_sample_figures_in_process(spark, tmp_path, capsys):
    """The README's sample run in this process (the quick tier's; a fresh process's run is the
    test above): the table, row accounting and manifest the README shows. The session's own
    settings are as they were after the run, those the run changes (RUN_SETTINGS) included."""
    before = {key: spark.conf.get(key, None) for key in RUN_SETTINGS}
    spark.conf.set("spark.sql.codegen.hugeMethodLimit", "60000")
    out = tmp_path / "sample"
    assert run(["--config", str(ROOT / "conf" / "sample.toml"), "--output", str(out)]) == EXIT_OK
    _assert_readme_sample(capsys.readouterr().out, out)
    assert spark.conf.get("spark.sql.codegen.hugeMethodLimit") == "60000"
    spark.conf.unset("spark.sql.codegen.hugeMethodLimit")
    assert {key: spark.conf.get(key, None) for key in RUN_SETTINGS} == before


def _assert_readme_sample(stdout: str, out: Path) -> None:
    # The table and row accounting the README shows, figure for figure, on whichever Spark runs the suite.
    readme = (ROOT / "README.md").read_text()
    shown = readme[readme.index("\n k  users  mean_ndcg") + 1 : readme.index("\nwrote /path/to/")].splitlines()
    assert len(shown) == 7 and shown == stdout.splitlines()[: len(shown)], stdout
    manifest = _manifest(out)
    assert [m["k"] for m in manifest["metrics"]] == [1, 5, 10, 20]
    # 610 MovieLens users plus user 999, whose one rating fell in the test split: no recommendations, still counted.
    assert all(m["users"] == 611 and m["users_without_recommendations"] == 1 for m in manifest["metrics"])
    assert manifest["input_rows"] == {"recommendations": 12200, "relevance": 20418}


@pytest.mark.process
def test_bad_input_in_a_fresh_process_is_one_line_on_stderr(tmp_path):
    """The README's promise, with Spark's own logging in play: a failed task is not logged first."""
    (tmp_path / "recs.csv").write_text("user_id,item_id,score\n1,a,0.9\n1,b,\n")
    (tmp_path / "rel.csv").write_text("user_id,item_id,relevance\n1,a,1\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ndcg_spark",
            "--recommendations",
            str(tmp_path / "recs.csv"),
            "--relevance",
            str(tmp_path / "rel.csv"),
            "--format",
            "csv",
            "--output",
            str(tmp_path / "out"),
            "--k",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == EXIT_INPUT
    # The JVM's own notice about its incubator modules is printed before Spark starts logging.
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("WARNING: Using incubator modules")]
    assert lines == ["ndcg-spark: error: recommendations column 'score' is null in 1 row, e.g. user_id=1/item_id=b"]


def test_defaults_toml_documents_every_option_with_its_default():
    import re
    import tomllib

    from ndcg_spark.job import CompareConfig, EvaluateConfig
    from ndcg_spark.options import EvaluationOptions

    path = ROOT / "conf" / "defaults.toml"
    text = path.read_text()
    values = tomllib.loads(text)
    evaluate_keys = {k: v for k, v in values.items() if k in EvaluateConfig.keys()}
    config = EvaluateConfig.from_mapping({**evaluate_keys, "recommendations": "r/", "relevance": "g/", "output": "o/"})
    assert config.options == EvaluationOptions()
    documented = set(re.findall(r"^#?\s*([a-z_]+)\s*=", text, flags=re.M))
    missing = (set(EvaluateConfig.keys()) | set(CompareConfig.keys())) - documented
    assert not missing, f"not documented in conf/defaults.toml: {sorted(missing)}"


def test_job_reproduces_the_seed_examples(tmp_path):
    """Two worked examples with published figures, from CSV through the job: two lists against graded
    truth over the whole list (mean NDCG 0.7356022113638424), and one list at k = 5 (DCG 7.149, NDCG 0.859)."""
    truth = {"A": 0.1, "B": 0.5, "C": 0.7, "D": 0.5, "E": 0.1}
    lists = {1: "ABC", 2: "DACBE"}
    (tmp_path / "recs.csv").write_text(
        "user_id,item_id,score\n"
        + "".join(f"{u},{i},{len(items) - r}\n" for u, items in lists.items() for r, i in enumerate(items))
    )
    (tmp_path / "rel.csv").write_text(
        "user_id,item_id,relevance\n" + "".join(f"{u},{i},{v}\n" for u in lists for i, v in truth.items())
    )
    out = tmp_path / "out"
    assert (
        run(
            [
                "--recommendations",
                str(tmp_path / "recs.csv"),
                "--relevance",
                str(tmp_path / "rel.csv"),
                "--format",
                "csv",
                "--output",
                str(out),
            ]
        )
        == EXIT_OK
    )
    metrics = _manifest(out)["metrics"]
    assert [m["k"] for m in metrics] == [None]
    assert metrics[0]["mean_ndcg"] == pytest.approx(0.7356022113638424, abs=1e-15)
    (tmp_path / "recs2.csv").write_text("user_id,item_id,score\n1,A,5\n1,B,4\n1,C,3\n1,D,2\n1,E,1\n")
    (tmp_path / "rel2.csv").write_text("user_id,item_id,relevance\n1,A,3\n1,B,2\n1,C,5\n1,D,0\n1,E,1\n")
    out2 = tmp_path / "out2"
    assert (
        run(
            [
                "--recommendations",
                str(tmp_path / "recs2.csv"),
                "--relevance",
                str(tmp_path / "rel2.csv"),
                "--format",
                "csv",
                "--output",
                str(out2),
                "--k",
                "5",
            ]
        )
        == EXIT_OK
    )
    row = _manifest(out2)["metrics"][0]
    assert row["mean_dcg"] == pytest.approx(7.149, abs=1e-3) and row["mean_ndcg"] == pytest.approx(0.859, abs=1e-3)


def test_run_date_reruns_replace_only_their_partition(spark, suite_inputs, tmp_path, capsys):
    """Scheduled-stage semantics: dynamic partition overwrite, manifest last, a failed gate after
    writing, failed runs change nothing."""
    from ndcg_spark.job.exits import EXIT_QUALITY_GATE

    recs_path, rel_path, recs, rel = suite_inputs
    out = tmp_path / "out"
    base = ["--relevance", rel_path, "--output", str(out), "--k", "3,10"]
    assert run(["--recommendations", recs_path, "--run-date", "2026-11-20", *base]) == EXIT_OK
    assert run(["--recommendations", recs_path, "--run-date", "2026-11-21", *base]) == EXIT_OK
    log = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [entry["partition"] for entry in log] == [{"run_date": "2026-11-20"}, {"run_date": "2026-11-21"}]

    def per_user(date):
        return spark.read.parquet(str(out / "per_user")).filter(f"run_date = '{date}'").drop("run_date")

    # Kept in memory: the files it was read from are rewritten below.
    before_20 = per_user("2026-11-20").localCheckpoint()
    # Re-run the 21st with a worse model: only that partition changes. Its quality gate fails
    # after writing, with its own exit code.
    worse = tmp_path / "worse"
    recs.withColumn("score", -recs["score"]).write.parquet(str(worse))
    capsys.readouterr()
    code = run(["--recommendations", str(worse), "--run-date", "2026-11-21", "--fail-below", "10:0.9", *base])
    assert code == EXIT_QUALITY_GATE
    assert "quality gate failed: mean NDCG@10" in capsys.readouterr().err
    assert_df_equality(per_user("2026-11-20"), before_20, ignore_row_order=True)
    library = evaluate(spark.read.parquet(str(worse)), rel, k=[3, 10]).per_user
    assert_df_equality(
        per_user("2026-11-21").orderBy("user_id", "k"), library.orderBy("user_id", "k"), ignore_nullable=True
    )
    assert spark.read.parquet(str(out / "per_user")).count() == 2 * library.count()
    manifest = json.loads((out / "_manifests" / "run_date=2026-11-21" / "summary.json").read_text())
    assert manifest["partition"] == {"run_date": "2026-11-21"}
    assert [(g["k"], g["passed"]) for g in manifest["quality_gates"]] == [(10, False)]

    # A failed run (invalid input) leaves the previous result of that date and its manifest intact.
    bad = tmp_path / "bad"
    recs.withColumn("score", recs["score"] * float("nan")).write.parquet(str(bad))
    before_21 = per_user("2026-11-21").localCheckpoint()
    assert run(["--recommendations", str(bad), "--run-date", "2026-11-21", *base]) == EXIT_INPUT
    assert_df_equality(per_user("2026-11-21"), before_21, ignore_row_order=True)
    assert json.loads((out / "_manifests" / "run_date=2026-11-21" / "summary.json").read_text()) == manifest


def test_job_reads_the_als_array_layout(spark, tmp_path):
    """recommendations_layout = "array" (ALSModel.recommendForAllUsers output) through the job:
    the rows counted and accounted for are the recommendations inside the arrays, and the item
    column is the one inside them."""
    recs = spark.createDataFrame(
        [(1, [(5, 0.9), (6, 0.5), (5, 0.1)]), (2, [(7, 0.3)]), (3, [])],
        "userId int, recommendations array<struct<movieId: int, rating: float>>",
    )
    rel = spark.createDataFrame(
        [(1, 6, 4.0), (2, 7, 3.0), (2, 8, 5.0), (4, 9, 1.0)], "userId int, movieId int, rating double"
    )
    out = tmp_path / "out"
    options = dict(
        recommendations_layout="array",
        user_col="userId",
        item_col="movieId",
        score_col="rating",
        relevance_col="rating",
        k=[3],
    )
    flags = [f"--{key.replace('_', '-')}={value if key != 'k' else '3'}" for key, value in options.items()]
    code = run(
        [
            "--recommendations",
            _write(recs, tmp_path / "recs"),
            "--relevance",
            _write(rel, tmp_path / "rel"),
            "--output",
            str(out),
            "--report",
            "false",
            *flags,
        ]
    )
    assert code == EXIT_OK
    manifest = _manifest(out)
    assert manifest["input_rows"] == {"recommendations": 4, "relevance": 4}
    assert manifest["rows"]["recommendations"]["read"] == 4
    assert manifest["rows"]["recommendations"]["set_aside"]["repeated item (slot kept, no gain)"] == 1
    expected = evaluate(recs, rel, **options).per_user.orderBy("userId", "k")
    got = spark.read.parquet(str(out / "per_user")).select(*expected.columns).orderBy("userId", "k")
    assert got.count() == 3  # users 1, 2 and 4 (3's array is empty and it has no judgements)
    assert_df_equality(got, expected, ignore_nullable=True)


def test_small_files_go_through_hadoop_as_single_files_on_a_file_uri(spark, suite_inputs, tmp_path, monkeypatch):
    """summary.json, report.html and the partition manifest are single files under their own
    names on a ``file://`` URI, written through the session's Hadoop FileSystem (spied on). The
    runs take their settings from a config file, a flag overriding one of them."""
    from ndcg_spark.job.outputs import files as storage

    written = []
    real = storage.HadoopFiles.write_text

    def spy(self, path, text):
        # The output as the job qualifies it (file:/...), whatever its spelling (file:///...).
        assert path.startswith(f"file:{tmp_path}/")
        if not path.endswith(".lease"):  # the lock's lease, renewed while the run holds it
            written.append(tuple(path.rsplit("/", 1)))
        real(self, path, text)

    monkeypatch.setattr(storage.HadoopFiles, "write_text", spy)
    recs_path, rel_path, _, _ = suite_inputs
    out = tmp_path / "out"
    config = tmp_path / "job.toml"
    config.write_text('k = [3]\ngain = "exponential"\n')
    args = ["--config", str(config), "--recommendations", Path(recs_path).as_uri(),
            "--relevance", Path(rel_path).as_uri(), "--gain", "linear"]  # fmt: skip
    for _ in range(2):  # a re-run replaces the files
        assert run([*args, "--output", out.as_uri()]) == EXIT_OK
    assert sorted(os.listdir(out)) == ["_ndcg_spark", "per_user", "report.html", "summary", "summary.json"]
    manifest = _manifest(out)
    assert manifest["settings"]["output"] == out.as_uri()
    # The config file's k, the flag's gain over the file's; the figure is the oracle's at k = 3.
    assert manifest["settings"]["gain"] == "linear"
    assert [m["k"] for m in manifest["metrics"]] == [3]
    preds = {1: [1, 6, 2], 2: [4, 1, 5], 3: [1, 2, 3]}
    rels = {1: {1: 3.0, 2: 2.0, 3: 1.0, 4: 1.0, 5: 1.0}, 2: {1: 2.0, 2: 0.0, 3: 0.0}, 3: {}}
    expected = sum(reference_ndcg(preds[u], rels[u], 3) for u in preds) / 3
    assert manifest["metrics"][0]["mean_ndcg"] == pytest.approx(expected, abs=1e-12)
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")
    dated = tmp_path / "dated"
    assert run([*args, "--output", dated.as_uri(), "--run-date", "2026-11-22"]) == EXIT_OK
    manifests = dated / "_manifests" / "run_date=2026-11-22"
    assert sorted(os.listdir(manifests)) == ["report.html", "summary.json"]
    assert json.loads((manifests / "summary.json").read_text())["partition"] == {"run_date": "2026-11-22"}
    # Each run: its staged report, the publish journal, then the marker.
    assert [name for _, name in written] == ["report.html", "publish.json", "summary.json"] * 3
    assert {d for d, name in written if name == "summary.json"} == {
        f"file:{out}",
        f"file:{dated}/_manifests/run_date=2026-11-22",
    }
