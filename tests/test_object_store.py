"""The job on a real S3 API (moto's server on loopback, through Hadoop's S3A: tests/object_store.py).

Inputs on ``s3a://`` give the figures local files give (trec_eval's own, for TREC); a missing
bucket or path, refused credentials and an endpoint that cannot be reached end in one line and
exit 3 within seconds. The folder output on ``s3a://``: a night published, SIGKILLs inside its
re-run's publish (the staged result with an unfinished multipart upload beside it; a folder
rename that S3A, copying object by object, had half done), readers see a whole old night or no
manifest, a plain retry publishes the whole new night and leaves no staging object and no
upload; two runs of one night started together publish one; ``history`` lists the nights.

Every job runs in a process of its own (the S3A jars must be on its JVM's classpath from the
start); the runs share one server and one bucket, module-scoped, in order.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests import object_store
from tests.helpers import trec_expected
from tests.publishing import ROOT, WAIT, check_invariant, kill_group, start_job, wait_for

pytestmark = [pytest.mark.s3, pytest.mark.job]

DATE, OTHER = "2026-11-21", "2026-11-22"


@pytest.fixture(scope="module")
def store():
    why = object_store.missing()
    if why:
        pytest.skip(why)
    server = object_store.Store()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def s3_inputs(store, inputs):
    """The publish tests' Parquet inputs (tests/conftest.py), put on the store."""
    from pathlib import Path

    return {name: store.upload(Path(path), f"inputs/{name}") for name, path in inputs.items()}


def conf(store):
    return object_store.conf_args(object_store.settings(store.endpoint))


def job_args(store, s3_inputs, model, date, *extra):
    return [
        *conf(store),
        "--recommendations",
        s3_inputs[model],
        "--relevance",
        s3_inputs["rel"],
        "--output",
        store.url("nightly"),
        "--run-date",
        date,
        "--k",
        "3,5",
        *extra,
    ]


def finished(proc):
    out, err = proc.communicate(timeout=WAIT)
    return proc.returncode, out, err


def reader_view(spark, store, tmp_path, name):
    """What a reader following docs/job.md sees of the night: its manifest and the tables it
    vouches for (files named in it, figures as the manifest has them), or None (no manifest)."""
    local = object_store.mirror(store, "nightly", tmp_path / name)
    return check_invariant(spark, local, f"run_date={DATE}")


# ----------------------------------------------------------------------------- inputs


def test_inputs_on_s3_give_the_local_figures_and_bad_ones_one_line_in_seconds(
    store, s3_inputs, inputs, data_dir, tmp_path
):
    """One JVM, many runs (tests/object_store.py's main): TREC, CSV and Parquet from s3a as from
    local files; then a missing bucket, a missing path, refused credentials and an endpoint that
    does not answer, each exit 3 with one line, well within 30 s."""
    trec = store.upload(data_dir / "trec_eval", "inputs/trec")
    movielens = store.upload(ROOT / "examples" / "movielens", "inputs/movielens")
    refusing_port, closed_port = object_store.free_port(), object_store.free_port()
    refusing = object_store.refusing_server(refusing_port)
    settings = object_store.settings(store.endpoint)
    # Two buckets of their own endpoints, as a team's per-bucket settings route them.
    settings["spark.hadoop.fs.s3a.bucket.refused.endpoint"] = f"http://127.0.0.1:{refusing_port}"
    settings["spark.hadoop.fs.s3a.bucket.unreachable.endpoint"] = f"http://127.0.0.1:{closed_port}"
    local = ROOT / "examples" / "movielens"
    rel = f"{movielens}/relevance.csv"

    def evaluate(recs, relevance, out, *extra):
        return ["--recommendations", recs, "--relevance", relevance, "--output", out, "--k", "5,10", *extra]

    trec_flags = ["--format", "trec", "--tie-break", "item_descending", "--k", "5,10,15,20,30,100,200,500,1000"]
    runs = [
        evaluate(f"{trec}/results.test", f"{trec}/qrels.test", store.url("trec"), *trec_flags),
        evaluate(f"{movielens}/recommendations.csv", rel, store.url("csv"), "--format", "csv"),
        evaluate(f"{local}/recommendations.csv", f"{local}/relevance.csv", str(tmp_path / "csv"), "--format", "csv"),
        evaluate(s3_inputs["good"], s3_inputs["rel"], str(tmp_path / "parquet-s3")),
        evaluate(inputs["good"], inputs["rel"], str(tmp_path / "parquet")),
    ]
    bad = {
        "s3a://nobucket/recommendations.csv": "its bucket does not exist",
        store.url("inputs", "missing"): "it does not exist",
        "s3a://refused/recommendations.csv": "the store refused access",
        "s3a://unreachable/recommendations.csv": "the store cannot be reached",
    }
    runs += [evaluate(source, rel, str(tmp_path / "bad"), "--format", "csv") for source in bad]
    plan, results = tmp_path / "plan.json", tmp_path / "results.json"
    plan.write_text(json.dumps({"conf": settings, "runs": runs}))
    try:
        driver = subprocess.run(
            [sys.executable, "-m", "tests.object_store", str(plan), str(results)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=WAIT,
        )
    finally:
        refusing.kill()
        refusing.wait(30)
    assert driver.returncode == 0, driver.stderr[-3000:]
    done = json.loads(results.read_text())
    good = len(runs) - len(bad)
    assert [r["code"] for r in done[:good]] == [0] * good, [r["stderr"][-800:] for r in done[:good]]

    # TREC from s3a: trec_eval's own figures.
    means = {m["k"]: m["mean_ndcg"] for m in json.loads(store.text("trec/summary.json"))["metrics"]}
    for (_, k), value in trec_expected(data_dir / "trec_eval" / "out.test.a", per_topic=False).items():
        assert means[k] == pytest.approx(value, abs=5e-5), k
    # CSV and Parquet from s3a: every figure and row count of the local files' runs, to the last bit.
    pairs = [
        (json.loads(store.text("csv/summary.json")), tmp_path / "csv"),
        (tmp_path / "parquet-s3", tmp_path / "parquet"),
    ]
    for on_s3, on_disk in pairs:
        on_s3 = on_s3 if isinstance(on_s3, dict) else json.loads((on_s3 / "summary.json").read_text())
        on_disk = json.loads((on_disk / "summary.json").read_text())
        assert on_s3["metrics"] == on_disk["metrics"] and on_s3["rows"] == on_disk["rows"]

    for source, cause, result in zip(bad, bad.values(), done[good:]):
        lines = result["stderr"].strip().splitlines()
        assert result["code"] == 3, result["stderr"][-1500:]
        assert len(lines) == 1 and lines[0].startswith("ndcg-spark: error: cannot read recommendations"), lines
        assert source in lines[0] and cause in lines[0], lines[0]
        assert "Exception" not in lines[0] and "Request ID" not in lines[0], lines[0]
        assert result["seconds"] < 30, (source, result["seconds"])


# ----------------------------------------------------------------------------- the folder output


@pytest.fixture(scope="module")
def night(store, s3_inputs):
    """The good model's night, published on s3a."""
    code, _, err = finished(start_job(job_args(store, s3_inputs, "good", DATE)))
    assert code == 0, err[-2000:]
    return json.loads(store.text(f"nightly/_manifests/run_date={DATE}/summary.json"))


def paused(store, s3_inputs, tmp_path, model, step):
    """A run of the night with ``model``, paused at ``step`` of its publish."""
    pause = tmp_path / f"paused-{step.replace(':', '-')}-{model}"
    proc = start_job(job_args(store, s3_inputs, model, DATE), pause=(step, pause))
    wait_for(pause.exists, proc, f"the publish step {step}")
    return proc


def staging_of(store):
    """The staging folders (run ids) of the night."""
    keys = store.keys(f"nightly/_ndcg_spark/staging/run_date={DATE}/")
    return sorted({key.split("/")[4] for key in keys if len(key.split("/")) > 5})


def means(marker):
    return {m["k"]: m["mean_ndcg"] for m in marker["metrics"]}


def test_kills_inside_a_publish_on_s3_show_a_whole_night_and_a_retry_completes(
    spark, store, s3_inputs, night, tmp_path
):
    good = means(night)
    bucket = object_store.BUCKET

    # 1. The worse model's re-run killed inside its publish, while S3A's rename of per_user had
    # copied its data file into place and deleted it from staging, but not its _SUCCESS: both
    # folders hold part of the table.
    proc = paused(store, s3_inputs, tmp_path, "worse", "removed:per_user")
    (run_id,) = staging_of(store)
    source = f"nightly/_ndcg_spark/staging/run_date={DATE}/{run_id}/tables/per_user/"
    data = [key for key in store.keys(source) if key.rsplit("/", 1)[-1].startswith("part-")]
    assert data and store.keys(f"nightly/per_user/run_date={DATE}/") == []
    for key in data:
        target = f"nightly/per_user/run_date={DATE}/{key[len(source) :]}"
        store.client.copy_object(Bucket=bucket, Key=target, CopySource={"Bucket": bucket, "Key": key})
        store.client.delete_object(Bucket=bucket, Key=key)
    kill_group(proc)
    assert reader_view(spark, store, tmp_path, "killed-in-rename") is None  # no manifest: being published

    # 2. A retry (the good model again) finishes that publish before staging its own: the worse
    # night is whole. It is killed there, writing a large file (an unfinished multipart upload).
    proc = paused(store, s3_inputs, tmp_path, "good", "staged")
    recovered = reader_view(spark, store, tmp_path, "recovered")
    assert recovered is not None and recovered["run"]["id"] == run_id
    worse = means(recovered)
    assert all(worse[k] < good[k] for k in good)
    (second,) = staging_of(store)
    upload = f"nightly/_ndcg_spark/staging/run_date={DATE}/{second}/tables/per_user/part-big.parquet"
    store.client.create_multipart_upload(Bucket=bucket, Key=upload)
    assert store.uploads() == [upload]
    kill_group(proc)
    assert means(reader_view(spark, store, tmp_path, "killed-staged")) == worse

    # 3. A plain retry of the worse model: the whole new night; no staging object, upload or lock left.
    code, _, err = finished(start_job(job_args(store, s3_inputs, "worse", DATE)))
    assert code == 0, err[-2000:]
    assert means(reader_view(spark, store, tmp_path, "after-retry")) == worse
    assert store.keys("nightly/_ndcg_spark/staging/") == [] and store.uploads() == []
    assert [k for k in store.keys("nightly/_ndcg_spark/locks/") if not k.endswith("/")] == []


def test_two_runs_of_one_night_started_together_on_s3_publish_one(spark, store, s3_inputs, night, tmp_path):
    """With S3A's conditional put (Hadoop 3.4.2 on) the lock is an exclusive create; before, a
    put read back after a settle: either way one run publishes and the other exits 5."""
    gate = ("--fail-if-drop", "5:1.0")  # a drop of at most 1: passes, having read the last night
    first = start_job(job_args(store, s3_inputs, "good", OTHER, *gate))
    second = start_job(job_args(store, s3_inputs, "worse", OTHER, *gate))
    results = [finished(first), finished(second)]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 5], [err[-1500:] for _, _, err in results]
    (refused,) = [err for code, _, err in results if code == 5]
    assert "is locked by run" in refused.strip().splitlines()[-1]
    local = object_store.mirror(store, "nightly", tmp_path / "two")
    marker = check_invariant(spark, local, f"run_date={OTHER}")
    winner = "good" if results[0][0] == 0 else "worse"
    assert marker["settings"]["recommendations"] == s3_inputs[winner]

    history = subprocess.run(
        [sys.executable, "-m", "ndcg_spark", "history", "--master", "local[1]", *conf(store),
         "--output", store.url("nightly"), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=WAIT,
    )  # fmt: skip
    assert history.returncode == 0, history.stderr[-2000:]
    listed = json.loads(history.stdout)
    assert (listed["runs"], listed["broken"], listed["unfinished"]) == ([DATE, OTHER], {}, {}), listed
    # The drop gate read the previous night's per-user table from s3a.
    drop = marker["regression_gate"]
    assert drop["previous"] == DATE and drop["gates"] and all(g["passed"] for g in drop["gates"]), drop
