"""A real S3 API on loopback for the object-store tests (``tests/test_object_store.py``).

The server is moto's (``moto[server]`` from PyPI), started in this process on 127.0.0.1: real
HTTP, real S3 semantics (a folder is a prefix, a rename a copy and a delete, ``If-None-Match:
*`` a conditional put). The job reaches it through Hadoop's S3A connector, ``hadoop-aws`` at the
Hadoop version of this PySpark's wheel with the AWS SDK bundle that Hadoop was built against,
fetched by ``scripts/fetch_jars.sh hadoop-VERSION`` into ``.jars/hadoop-VERSION/``.

The job runs in processes of its own (the jars must be on its JVM's classpath from the start,
which the suite's shared session is not), with the settings a team passes (docs/cluster.md).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import pyspark

ROOT = Path(__file__).resolve().parents[1]
BUCKET = "ndcg"
#: The keys moto accepts (it checks none unless told to) and a region of its own.
KEY, SECRET, REGION = "testing", "testing", "us-east-1"


def hadoop_version() -> Optional[str]:
    """The Hadoop version this PySpark's wheel ships (its ``jars/hadoop-client-api-*.jar``)."""
    found = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    return found[0].name[len("hadoop-client-api-") : -len(".jar")] if found else None


def jars() -> List[str]:
    version = hadoop_version()
    return sorted(str(p) for p in (ROOT / ".jars" / f"hadoop-{version}").glob("*.jar")) if version else []


def conditional_puts() -> bool:
    """Whether this Hadoop's S3A can create a file only if absent (``If-None-Match: *``): 3.4.2 on."""
    version = tuple(int(p) for p in (hadoop_version() or "0").split(".")[:3])
    return version >= (3, 4, 2)


def missing() -> Optional[str]:
    """Why the object-store tests cannot run here, or None."""
    try:
        import boto3  # noqa: F401
        from moto.server import ThreadedMotoServer  # noqa: F401
    except ImportError:
        return "moto[server] and boto3 are not installed (pip install 'moto[server]')"
    version = hadoop_version()
    if not any(j.rsplit("/", 1)[-1].startswith("hadoop-aws-") for j in jars()):
        return f"the S3A jars are not in .jars/hadoop-{version}/: run scripts/fetch_jars.sh hadoop-{version}"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def settings(endpoint: str, key: str = KEY, secret: str = SECRET) -> Dict[str, str]:
    """The Spark settings a team sets for an S3-compatible store (docs/cluster.md's object stores)."""
    conf = {
        "spark.jars": ",".join(jars()),
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": REGION,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "spark.hadoop.fs.s3a.access.key": key,
        "spark.hadoop.fs.s3a.secret.key": secret,
    }
    if conditional_puts():
        conf["spark.hadoop.fs.s3a.create.conditional.enabled"] = "true"
    return conf


def conf_args(conf: Dict[str, str]) -> List[str]:
    return [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]


class Store:
    """The running server, a client of it and the bucket the tests write to."""

    def __init__(self):
        import boto3
        from moto.server import ThreadedMotoServer

        self.port = free_port()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.client = boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=KEY, aws_secret_access_key=SECRET
        )
        self.client.create_bucket(Bucket=BUCKET)

    def stop(self) -> None:
        self.server.stop()

    def url(self, *parts: str) -> str:
        return "/".join([f"s3a://{BUCKET}", *parts])

    def upload(self, folder: Path, prefix: str) -> str:
        """Every file under ``folder`` put under ``prefix``; the prefix as an s3a URL."""
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            self.client.upload_file(str(path), BUCKET, f"{prefix}/{path.relative_to(folder)}")
        return self.url(prefix)

    def keys(self, prefix: str = "") -> List[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def text(self, key: str) -> Optional[str]:
        try:
            return self.client.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode("utf-8")
        except self.client.exceptions.NoSuchKey:
            return None

    def uploads(self) -> List[str]:
        """The keys of multipart uploads begun and neither completed nor aborted."""
        return sorted(u["Key"] for u in self.client.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []))


def refusing_server(port: int):
    """A second moto server that checks every request's credentials against its own IAM, which
    holds none: every key is refused (403 InvalidAccessKeyId), as a store refuses wrong keys."""
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while time.time() < deadline and server.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"moto's server did not listen on port {port}")


def mirror(store: Store, prefix: str, into: Path) -> Path:
    """The objects under ``prefix`` as local files under ``into`` (a reader's copy of the output,
    read with the suite's own session, which has no S3A); folder markers are left out."""
    for key in store.keys(prefix + "/"):
        if key.endswith("/"):
            continue
        target = into / key[len(prefix) + 1 :]
        target.parent.mkdir(parents=True, exist_ok=True)
        store.client.download_file(BUCKET, key, str(target))
    return into


def main(argv: List[str]) -> None:
    """``python -m tests.object_store PLAN RESULTS``: one session with the S3A settings of the plan
    (JSON: ``conf``, ``runs``, each a job's arguments), each run through the job's ``run`` in this
    process, its exit code, stderr and seconds written to RESULTS (JSON): one JVM for many runs."""
    from pyspark.sql import SparkSession

    from ndcg_spark.job import run

    plan = json.loads(Path(argv[0]).read_text())
    builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    for key, value in plan["conf"].items():
        builder = builder.config(key, value)
    builder.getOrCreate()
    results = []
    for job in plan["runs"]:
        err, started = io.StringIO(), time.time()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = run(job)
        results.append({"argv": job, "code": code, "stderr": err.getvalue(), "seconds": time.time() - started})
    Path(argv[1]).write_text(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
