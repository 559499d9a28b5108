#!/usr/bin/env bash
# One night of a scheduled evaluation: evaluate tonight's recommendations into a dated partition
# of one output with the gates of the config (fail_below, fail_if_drop: a floor, and a drop since
# the previous complete night), log the run to MLflow when an experiment is named, then show the
# last week of the output's history.
#
#   examples/nightly.sh nightly.toml [YYYY-MM-DD]        # the date defaults to today (UTC)
#   MLFLOW_EXPERIMENT=ndcg-nightly examples/nightly.sh nightly.toml
#
# Exit codes are the job's: 0 ok; 2 config, 3 input, 4 a gate failed (outputs published): do not
# retry those, the same run gives the same answer; 5 another run holds the date; 1 anything else
# (the run may be retried: a re-run of the date replaces exactly its own result).
set -euo pipefail

config=${1:?usage: $0 CONFIG.toml [YYYY-MM-DD]}
date=${2:-$(date -u +%F)}
# The output as the job reads it (a ./path is relative to the config file).
output=$(python3 -c 'import sys; from ndcg_spark.job import load_toml; print(load_toml(sys.argv[1])["output"])' "$config")

tracking=()
if [[ -n "${MLFLOW_EXPERIMENT:-}" ]]; then
  tracking=(--mlflow-experiment "$MLFLOW_EXPERIMENT")   # the store: MLFLOW_TRACKING_URI
fi

status=0
ndcg-spark --config "$config" --run-date "$date" ${tracking[@]+"${tracking[@]}"} || status=$?

# The history is read from the runs' manifests: tonight's is there even when a gate failed.
ndcg-spark history --output "$output" --last 7 || true
exit "$status"
