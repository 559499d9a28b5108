"""Iceberg and Delta tables on S3 (moto's server on loopback, through Hadoop's S3A: tests/object_store.py),
their metastores where a team keeps them (Derby, SQLite) and their files and the job's lock on the
store: a night published, its re-runs SIGKILLed at each commit, then a plain retry
(:func:`tests.kill_chains.kill_chain`). Iceberg's JDBC catalog under its own name (``lake.ev.ndcg``,
its files through Hadoop's file IO over ``s3a://``; a JDBC catalog commits by a row swap, not a
rename) and Delta's session catalog (its commits through Delta's S3 log store, the default for
``s3a://``: one writer at a time, which the job's lock gives).

CI runs it on Spark 4.1 (its Hadoop, 3.4.2, has S3A's conditional put for the lock): a file of its
own so that pytest-xdist runs it beside ``tests/test_table_format_processes.py``'s chains.
"""

from __future__ import annotations

import pytest

from tests import kill_chains, object_store

pytestmark = [pytest.mark.formats, pytest.mark.s3, pytest.mark.job]


@pytest.fixture
def store():
    reason = object_store.missing()
    if reason is not None:
        pytest.skip(reason)
    server = object_store.Store()
    yield server
    server.stop()


@pytest.mark.process
@pytest.mark.parametrize(
    "setup_name, family", [("iceberg", "lake.ev.ndcg"), ("delta", "default.ndcg")], ids=["iceberg-jdbc", "delta"]
)
def test_sigkills_at_each_commit_on_s3_leave_whole_nights_and_a_plain_retry_completes(
    setup_name, family, store, tmp_path
):
    kill_chains.kill_chain(setup_name, family, tmp_path, store)
