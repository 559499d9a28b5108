"""Presets by library name (``convention``) and the switches they set.

Each preset reproduces the expected figures of that library's own tests and doctests (the file and
test are named in each docstring; inputs and expected figures carry over as they are there), and,
for scikit-learn, pytrec_eval (trec_eval) and ranx, the live library per user on random graded data.
One Spark job per test: the cases of a test are users of one evaluation.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import pytrec_eval
from chispa import assert_approx_df_equality
from sklearn.metrics import ndcg_score

from ndcg_spark import EvaluationOptions, evaluate
from ndcg_spark.conventions import PRESETS
from ndcg_spark.errors import ConfigError
from ndcg_spark.job import run
from ndcg_spark.job.config.parsing import parse_config
from ndcg_spark.job.exits import EXIT_OK
from tests.helpers import frames, random_graded, trec_ndcg_expected, trec_tables

RECS = "user_id int, item_id string, score double"
RANKED = "user_id int, item_id int, rank int"
REL = "user_id int, item_id string, relevance double"
REL_INT = "user_id int, item_id int, relevance double"
PER_USER_NDCG = "user_id int, k int, ndcg double"


def scored(spark, lists):
    """Recommendations from {user: [score of item d0, of d1, ...]}."""
    rows = [(u, f"d{i}", float(s)) for u, scores in lists.items() for i, s in enumerate(scores)]
    return spark.createDataFrame(rows, RECS)


def graded(spark, grades):
    """Relevance from {user: [grade of item d0, of d1, ...]}, every item judged (zeros included)."""
    rows = [(u, f"d{i}", float(g)) for u, gs in grades.items() for i, g in enumerate(gs)]
    return spark.createDataFrame(rows, REL)


def ranked(spark, lists):
    """Recommendations from {user: [item at rank 1, item at rank 2, ...]} with descending scores."""
    rows = [(u, str(item), float(len(items) - i)) for u, items in lists.items() for i, item in enumerate(items)]
    return spark.createDataFrame(rows, RECS)


def judged(spark, rels):
    """Relevance from {user: {item: relevance}}."""
    return spark.createDataFrame([(u, str(i), float(r)) for u, m in rels.items() for i, r in m.items()], REL)


def figures(result, name="ndcg"):
    """{(user, k): figure} from one Spark job."""
    return {(r.user_id, r.k): r[name] for r in result.per_user.select("user_id", "k", name).collect()}


def mean_of(values, users, k):
    return sum(values[(u, k)] for u in users) / len(users)


# ------------------------------------------------------------------------------- presets and switches


@pytest.mark.job
def test_a_preset_sets_its_switches_and_explicit_options_override_it():
    opts = EvaluationOptions(convention="sklearn", ties="item")
    assert (opts.ideal, opts.ties, opts.convention) == ("candidates", "item", "sklearn")
    assert EvaluationOptions(convention="rectools").positions == "as_given"
    # A preset laid over options keeps the options it does not name; later changes still win.
    assert EvaluationOptions(k=5).updated(convention="trec_eval", whole_list="list_length").whole_list == "list_length"
    # ir_measures' nDCG runs on pytrec_eval: the same conventions as trec_eval.
    assert PRESETS["ir_measures"] == PRESETS["trec_eval"]
    with pytest.raises(ConfigError, match="convention = 'sklean' is not one of"):
        EvaluationOptions(convention="sklean")
    with pytest.raises(ConfigError, match="log_base must be a number above 1"):
        EvaluationOptions(log_base=1)
    config, _ = parse_config(
        ["--recommendations", "r/", "--relevance", "g/", "--output", "o/", "--convention", "recommenders"]
        + ["--gains", "0:0,1:1,2=5", "--log-base", "e", "--discount", "lenskit"]
    )
    assert config.options.gains == ((0.0, 0.0), (1.0, 1.0), (2.0, 5.0))
    assert (config.options.log_base, config.options.discount, config.options.zero_idcg) == (
        math.e,
        "lenskit",
        "exclude",
    )
    assert config.to_dict()["gains"] == {"0": 0.0, "1": 1.0, "2": 5.0}


def test_gains_map_as_trec_eval_documents_it(spark):
    """m_ndcg.c (trec_eval): ``-m ndcg.1=3.5,2=9.0,4=7.0`` gives gains 3.5, 9.0, 3.0, 7.0 to levels 1-4
    (level 3 keeps its own value); the ideal list is sorted by gain, so level 2 comes before level 4."""
    recs = ranked(spark, {1: ["a", "b", "c", "d", "e"]})
    rel = judged(spark, {1: {"a": 1, "b": 3, "c": 0, "d": 4, "e": 2}})
    [row] = evaluate(recs, rel, convention="trec_eval", gains={1: 3.5, 2: 9.0, 4: 7.0}).per_user.collect()
    dcg = 3.5 + 3.0 / math.log2(3) + 7.0 / math.log2(5) + 9.0 / math.log2(6)
    ideal = 9.0 + 7.0 / math.log2(3) + 3.5 / math.log2(4) + 3.0 / math.log2(5)
    assert (row.dcg, row.idcg) == (pytest.approx(dcg, abs=1e-12), pytest.approx(ideal, abs=1e-12))
    assert row.n_relevant == 4


def test_defaults_are_unchanged_by_the_new_switches():
    opts = EvaluationOptions()
    assert (opts.discount, opts.log_base, opts.ideal, opts.positions, opts.gains, opts.whole_list) == (
        "log2",
        2.0,
        "relevance",
        "renumber",
        (),
        "list_length",
    )
    assert opts.convention is None and opts.zero_idcg == "zero"


# ------------------------------------------------------------------------------- scikit-learn

SK_TRUE = [10, 0, 0, 1, 5]


def test_sklearn_doctests_and_toy_examples(spark):
    """sklearn/metrics/_ranking.py doctests of ``ndcg_score`` (0.69, 0.49, 0.35 at k=4, 1.0, 0.75 with
    averaged ties) and ``dcg_score`` (9.49, 5.63 at k=2, 7.5 with averaged ties); sklearn/metrics/
    tests/test_ranking.py ``test_ndcg_toy_examples`` (3·eye(7)[:5] and 3·ones scored 6..0) and
    ``test_dcg_ties`` (y_true 0..4, all scores tied, then the last two tied above)."""
    toy = {10 + r: [3 if i == r else 0 for i in range(7)] for r in range(5)}
    ones = {20 + r: [3] * 7 for r in range(5)}
    scores = {
        1: [0.1, 0.2, 0.3, 4, 70],
        2: [0.05, 1.1, 1.0, 0.5, 0.0],
        3: SK_TRUE,
        4: [1, 0, 0, 0, 1],
        **{u: list(range(6, -1, -1)) for u in [*toy, *ones]},
        30: [0, 0, 0, 0, 0],
        31: [0, 0, 0, 1, 1],
    }
    grades = {1: SK_TRUE, 2: SK_TRUE, 3: SK_TRUE, 4: SK_TRUE, **toy, **ones, 30: [0, 1, 2, 3, 4], 31: [0, 1, 2, 3, 4]}
    result = evaluate(scored(spark, scores), graded(spark, grades), convention="sklearn", k=[1, 2, 4, None])
    rows = {(r.user_id, r.k): r for r in result.per_user.collect()}
    # scikit-learn's doctests compare floats to the digits written (pytest's NUMBER option).
    assert rows[(1, None)].ndcg == pytest.approx(0.69, abs=0.01) and rows[(1, None)].dcg == pytest.approx(
        9.49, abs=0.01
    )
    assert rows[(1, 2)].dcg == pytest.approx(5.63, abs=0.01)
    assert rows[(2, None)].ndcg == pytest.approx(0.49, abs=0.01) and rows[(2, 4)].ndcg == pytest.approx(0.35, abs=0.01)
    assert rows[(3, 4)].ndcg == pytest.approx(1.0)
    assert rows[(4, 1)].ndcg == pytest.approx(0.75) and rows[(4, 1)].dcg == pytest.approx(7.5)
    positions = np.arange(2, 7)
    assert [rows[(u, None)].dcg for u in toy] == pytest.approx(list(3 / np.log2(positions)))
    assert [rows[(u, None)].ndcg for u in toy] == pytest.approx(list(1 / np.log2(positions)))
    assert np.mean([rows[(u, None)].ndcg for u in toy]) == pytest.approx((1 / np.log2(positions)).mean())
    assert np.mean([rows[(u, None)].dcg for u in toy]) == pytest.approx((3 / np.log2(positions)).mean())
    assert [rows[(u, None)].dcg for u in ones] == pytest.approx([(3 / np.log2(np.arange(2, 9))).sum()] * 5)
    assert [rows[(u, None)].ndcg for u in ones] == pytest.approx([1.0] * 5)
    discounts = 1 / np.log2(np.arange(2, 7))
    assert rows[(30, None)].dcg == pytest.approx(discounts.sum() * 2.0)
    assert rows[(31, None)].dcg == pytest.approx(discounts[:2].sum() * 3.5 + discounts[2:].sum() * 1.0)


def test_sklearn_log_base_changes_dcg_not_ndcg(spark):
    """test_ranking.py ``test_ndcg_toy_examples``: ``_dcg_sample_scores(..., log_base=10)`` is
    3 / log10(2..6); NDCG is the same as with base 2."""
    toy = {r: [3 if i == r else 0 for i in range(7)] for r in range(5)}
    scores = {u: list(range(6, -1, -1)) for u in toy}
    rows = {
        r.user_id: r
        for r in evaluate(
            scored(spark, scores), graded(spark, toy), convention="sklearn", log_base=10
        ).per_user.collect()
    }
    assert [rows[u].dcg for u in toy] == pytest.approx(list(3 / np.log10(np.arange(2, 7))))
    assert [rows[u].ndcg for u in toy] == pytest.approx(list(1 / np.log2(np.arange(2, 7))))


def test_sklearn_ignore_ties_is_the_item_tie_break(spark):
    """_ranking.py doctests with ``ignore_ties=True`` (ndcg 0.5, dcg 5.0 at k=1) and test_ranking.py
    ``test_dcg_ties`` with ``ignore_ties=True``: ``argsort(...)[::-1]`` puts tied items last-index
    first, which is ``tie_break = "item_descending"`` over items named by their index."""
    scores, grades = (
        {4: [1, 0, 0, 0, 1], 30: [0] * 5, 31: [0, 0, 0, 1, 1]},
        {4: SK_TRUE, 30: [0, 1, 2, 3, 4], 31: [0, 1, 2, 3, 4]},
    )
    opts = dict(convention="sklearn", ties="item", tie_break="item_descending", k=[1, None])
    rows = {
        (r.user_id, r.k): r for r in evaluate(scored(spark, scores), graded(spark, grades), **opts).per_user.collect()
    }
    assert rows[(4, 1)].ndcg == pytest.approx(0.5) and rows[(4, 1)].dcg == pytest.approx(5.0)
    discounts = 1 / np.log2(np.arange(2, 7))
    assert rows[(30, None)].dcg == pytest.approx((discounts * np.arange(5)[::-1]).sum())
    assert rows[(31, None)].dcg == pytest.approx((discounts * np.arange(5)[::-1]).sum())


def test_sklearn_live_on_random_tied_grades(spark):
    """Per user, to 1e-9: ``ndcg_score`` on each user's recommended items (y_true their grades, 0
    when unjudged; integer scores 0-3, so many ties) against the ``sklearn`` preset."""
    rng = np.random.default_rng(27)
    recs, rels = {}, {}
    for u in range(40):
        items = [f"i{j:02d}" for j in rng.choice(30, size=8, replace=False)]
        recs[u] = {i: float(s) for i, s in zip(items, rng.integers(0, 4, size=8))}
        judged_items = rng.choice(30, size=10, replace=False)
        rels[u] = {f"i{j:02d}": int(rng.integers(0, 4)) for j in judged_items}
    rels[3] = {i: 0 for i in rels[3]}  # a user with nothing relevant: 0 in scikit-learn
    # Finite cutoffs up to 20 are summed on the list's row (the whole list, in the doctests, by rows).
    cutoffs = [1, 3, 5, 10]
    rows = []
    for u, scores in recs.items():
        items = sorted(scores)
        y_true = np.array([[rels[u].get(i, 0) for i in items]], dtype=float)
        y_score = np.array([[scores[i] for i in items]])
        rows += [(u, k, float(ndcg_score(y_true, y_score, k=k))) for k in cutoffs]
    expected = spark.createDataFrame(rows, PER_USER_NDCG).orderBy("user_id", "k")
    got = evaluate(*frames(spark, recs, rels), convention="sklearn", k=cutoffs).per_user.select("user_id", "k", "ndcg")
    assert_approx_df_equality(got.orderBy("user_id", "k"), expected, precision=1e-9, ignore_nullable=True)


# ------------------------------------------------------------------------------- trec_eval, ir_measures

TREC_CUTOFFS = [5, 10, 15, 20, 30, 100, 200, 500, 1000, None]


def test_trec_eval_preset_on_trec_evals_own_test_files(spark, data_dir):
    """trec_eval 10.0 test/out.test.aq and out.test.a: ``ndcg`` (no cutoff: the whole run against every
    judged document) and ``ndcg_cut_k``, per topic and averaged, from results.test and qrels.test."""
    results, qrels = trec_tables(spark, data_dir)
    got = figures(evaluate(results, qrels, convention="trec_eval", k=TREC_CUTOFFS))
    expected = {
        key: v for key, v in trec_ndcg_expected(data_dir / "trec_eval" / "out.test.aq").items() if key[0] != "all"
    }
    assert len(expected) == 3 * len(TREC_CUTOFFS)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=5e-5), key
    topics = ["301", "302", "303"]
    for (_, k), value in trec_ndcg_expected(data_dir / "trec_eval" / "out.test.a").items():
        assert mean_of(got, topics, k) == pytest.approx(value, abs=5e-5), k


@pytest.mark.job
def test_job_with_the_trec_eval_convention(spark, data_dir, tmp_path):
    """``ndcg-spark --convention trec_eval`` on trec_eval's test files (as Parquet) gives out.test.a's
    ``ndcg`` and ``ndcg_cut_k`` means, and the manifest records the convention and its switches."""
    results, qrels = trec_tables(spark, data_dir)
    results.write.parquet(str(tmp_path / "results"))
    qrels.write.parquet(str(tmp_path / "qrels"))
    out = tmp_path / "out"
    argv = ["--recommendations", str(tmp_path / "results"), "--relevance", str(tmp_path / "qrels")]
    argv += ["--output", str(out), "--convention", "trec_eval", "--k", "5,10,100,1000,all", "--report", "false"]
    assert run(argv) == EXIT_OK
    manifest = json.loads((out / "summary.json").read_text())
    means = {m["k"]: m["mean_ndcg"] for m in manifest["metrics"]}
    expected = trec_ndcg_expected(data_dir / "trec_eval" / "out.test.a")
    for k in (5, 10, 100, 1000, None):
        assert means[k] == pytest.approx(expected[("all", k)], abs=5e-5), k
    settings = manifest["settings"]
    assert (settings["convention"], settings["whole_list"], settings["tie_break"]) == (
        "trec_eval",
        "all_judged",
        "item_descending",
    )


def test_trec_eval_live_on_random_tied_grades(spark):
    """Per user, to 1e-9: pytrec_eval's ``ndcg_cut_k`` and ``ndcg`` (integer scores 0-4, so ties, which
    trec_eval orders by document id descending) against the ``trec_eval`` preset."""
    recs, rels = random_graded(seed=27, users=20, list_length=15, judged_per_user=12, ties=True)
    cutoffs = [1, 3, 5, 10]
    evaluator = pytrec_eval.RelevanceEvaluator(
        {str(u): m for u, m in rels.items()}, {"ndcg", "ndcg_cut." + ",".join(map(str, cutoffs))}
    )
    trec = evaluator.evaluate({str(u): m for u, m in recs.items()})
    rows = [(u, k, trec[str(u)]["ndcg" if k is None else f"ndcg_cut_{k}"]) for u in recs for k in [*cutoffs, None]]
    expected = spark.createDataFrame(rows, PER_USER_NDCG).orderBy("user_id", "k")
    got = evaluate(*frames(spark, recs, rels), convention="trec_eval", k=[*cutoffs, None]).per_user
    assert_approx_df_equality(
        got.select("user_id", "k", "ndcg").orderBy("user_id", "k"), expected, precision=1e-9, ignore_nullable=True
    )


# ------------------------------------------------------------------------------- ranx

RANX_TRUE = {"2": 5, "4": 4, "5": 3, "10": 2}
RANX_RUNS = {1: ["1", "2", "3", "4", "5"], 2: ["10", "5", "2", "4", "3"], 3: ["1", "3", "6", "7", "8"]}


@pytest.mark.parametrize("gain", ["linear", "exponential"])
def test_ranx_metrics_tests(spark, gain):
    """ranx tests/unit/ranx/metrics_test.py ``test_dcg_jarvelin``, ``test_ndcg_jarvelin`` (linear gain,
    the "ndcg" metric) and ``test_dcg_burges``, ``test_ndcg_burges`` (2^rel - 1, "ndcg_burges"), k = 10."""
    g = (lambda r: r) if gain == "linear" else (lambda r: 2**r - 1)
    result = evaluate(
        ranked(spark, RANX_RUNS), judged(spark, {u: RANX_TRUE for u in RANX_RUNS}), convention="ranx", gain=gain, k=10
    )
    rows = {r.user_id: r for r in result.per_user.collect()}
    idcg = g(5) / np.log2(2) + g(4) / np.log2(3) + g(3) / np.log2(4) + g(2) / np.log2(5)
    dcg_1 = g(5) / np.log2(3) + g(4) / np.log2(5) + g(3) / np.log2(6)
    dcg_2 = g(2) / np.log2(2) + g(3) / np.log2(3) + g(5) / np.log2(4) + g(4) / np.log2(5)
    assert [rows[u].dcg for u in (1, 2, 3)] == pytest.approx([dcg_1, dcg_2, 0.0])
    assert [rows[u].ndcg for u in (1, 2, 3)] == pytest.approx([dcg_1 / idcg, dcg_2 / idcg, 0.0])


def test_ranx_live_on_random_untied_grades(spark):
    """Per user, to 1e-9: ranx's ``ndcg@k`` and ``ndcg`` (k = 0: the whole run against every relevant
    judgement) on untied scores against the ``ranx`` preset. ranx orders tied scores by the order the
    run was built in, which a table does not have; the preset breaks ties by item (``tie_break``).
    ranx is not a test dependency (its first call compiles with numba for about a minute on 2 cores):
    the test runs where it is installed."""
    ranx = pytest.importorskip("ranx")
    recs, rels = random_graded(seed=5, users=25, list_length=12, judged_per_user=10)
    cutoffs = [1, 3, 5, 10]
    qrels = ranx.Qrels({str(u): m for u, m in rels.items()})
    run_ = ranx.Run({str(u): m for u, m in recs.items()})
    ranx.evaluate(qrels, run_, [f"ndcg@{k}" for k in cutoffs] + ["ndcg"], return_mean=False)
    rows = [
        (u, k, float(run_.scores["ndcg" if k is None else f"ndcg@{k}"][str(u)])) for u in recs for k in [*cutoffs, None]
    ]
    expected = spark.createDataFrame(rows, PER_USER_NDCG).orderBy("user_id", "k")
    got = evaluate(*frames(spark, recs, rels), convention="ranx", k=[*cutoffs, None]).per_user
    assert_approx_df_equality(
        got.select("user_id", "k", "ndcg").orderBy("user_id", "k"), expected, precision=1e-9, ignore_nullable=True
    )


# ------------------------------------------------------------------------------- torchmetrics


def test_torchmetrics_doctests_and_empty_target_pos(spark):
    """src/torchmetrics/functional/retrieval/ndcg.py doctest (tensor(0.6957)) and the
    ``RetrievalNormalizedDCG`` doctest (two queries, mean tensor(0.8467)); with ``zero_idcg = "one"``
    a query without a positive target scores 1.0, as ``empty_target_action="pos"``."""
    scores = {1: [0.1, 0.2, 0.3, 4, 70], 10: [0.2, 0.3, 0.5], 11: [0.1, 0.3, 0.5, 0.2], 20: [0.4, 0.2]}
    grades = {1: SK_TRUE, 10: [0, 0, 1], 11: [0, 1, 0, 1], 20: [0, 0]}
    got = figures(evaluate(scored(spark, scores), graded(spark, grades), convention="torchmetrics", zero_idcg="one"))
    assert round(got[(1, None)], 4) == 0.6957
    assert round(mean_of(got, [10, 11], None), 4) == 0.8467
    assert got[(20, None)] == 1.0


# ------------------------------------------------------------------------------- recommender libraries


def test_rectools_doctest_and_tests(spark):
    """rectools/metrics/ranking.py ``NDCG`` doctest (k=1: 0, 1, 1, 1; k=3: 0, 0.46927873, 0.70391809, 1)
    and tests/metrics/test_ranking.py ``TestNDCG.test_calc`` (ranks with gaps; the ideal is k relevant
    positions; user 6 has no interactions and is not scored)."""
    doc = [(101, 7, 1), (101, 8, 2), (102, 1, 1), (102, 2, 2), (103, 1, 1), (103, 2, 2), (103, 3, 3), (103, 4, 4)]
    doc += [(104, 1, 1), (104, 2, 2), (104, 3, 3)]
    doc_truth = [(101, 1), (101, 2), (102, 1), (103, 1), (103, 3), (103, 4), (104, 1), (104, 2), (104, 3)]
    calc = list(
        zip([1, 2, 3, 3, 3, 4, 5, 5, 5, 5, 6], [1, 2, 1, 2, 3, 1, 1, 2, 3, 5, 1], [9, 1, 1, 2, 3, 1, 3, 7, 9, 1, 1])
    )
    calc_truth = list(zip([1, 2, 3, 3, 3, 4, 5, 5, 5, 5], [1, 1, 1, 2, 3, 1, 1, 2, 3, 4]))
    recs = spark.createDataFrame(doc + calc, RANKED)
    rel = spark.createDataFrame([(u, i, 1.0) for u, i in doc_truth + calc_truth], REL_INT)
    result = evaluate(recs, rel, convention="rectools", rank_col="rank", k=[1, 3])
    got = figures(result)
    # Ranks past k are counted from the ranks themselves, gaps or not; user 6 is left out.
    rows = result.row_accounting()
    reasons = ("recommendations_used", "recommendations_beyond_k", "recommendations_excluded")
    assert tuple(rows[r] for r in reasons) == (17, 4, 1)
    idcg_3 = 1 / np.log2(2) + 1 / np.log2(3) + 1 / np.log2(4)
    assert [got[(u, 1)] for u in (101, 102, 103, 104)] == [0.0, 1.0, 1.0, 1.0]
    assert [got[(u, 3)] for u in (101, 102, 103, 104)] == pytest.approx([0.0, 0.46927873, 0.70391809, 1.0], abs=1e-8)
    assert [got[(u, 1)] for u in range(1, 6)] == [0.0, 0.0, 1.0, 1.0, 0.0]
    assert [got[(u, 3)] for u in range(1, 6)] == pytest.approx([0, 0, 1, 1 / idcg_3, 0.5 / idcg_3])
    assert not any(u == 6 for u, _ in got)


def lenskit_dcg(gains):
    """LensKit's DCG: rank r weighs 1 / max(log2(r), 1)."""
    return sum(g / max(math.log2(r), 1.0) for r, g in enumerate(gains, start=1))


def test_lenskit_tests(spark):
    """lenskit tests/eval/test_rank_ndcg.py: ``test_ndcg_empty``, ``test_ndcg_no_match``, ``test_ndcg_perfect``,
    ``test_ndcg_perfect_n_short``, ``test_ndcg_shorter_not_best``, ``test_ndcg_perfect_k``,
    ``test_ndcg_perfect_k_norate``, ``test_ndcg_empty_truth_returns_nan`` (binary: every truth item gains 1,
    given as relevance 1) and, with ``gain="rating"`` (the ratings as relevance),
    ``test_ndcg_shorter_not_best`` and ``test_ndcg_almost_perfect_k_gain``. n=None is the whole list
    against every truth item; n=2 is k=2."""
    truth = {1: 3.0, 2: 5.0, 3: 4.0}
    lists = {2: [4], 3: [2, 3, 1], 4: [2, 3], 5: [1, 2], 6: [1, 3], 7: [1, 2, 3], 15: [1, 2], 16: [1, 3]}
    binary = {u: {i: 1.0 for i in truth} for u in (1, 2, 3, 4, 5, 6)}
    rating = {15: truth, 16: truth}
    got = figures(
        evaluate(ranked(spark, lists), judged(spark, {**binary, **rating}), convention="lenskit", k=[2, None])
    )
    assert got[(1, None)] == 0.0 and got[(2, None)] == 0.0
    assert got[(3, None)] == pytest.approx(1.0) and got[(3, 2)] == pytest.approx(1.0)
    assert got[(4, 2)] == pytest.approx(1.0) and got[(6, 2)] == pytest.approx(1.0)
    assert got[(5, None)] == pytest.approx(lenskit_dcg([1, 1]) / lenskit_dcg([1, 1, 1])) and got[
        (5, 2)
    ] == pytest.approx(1.0)
    assert got[(15, None)] == pytest.approx(lenskit_dcg([3.0, 5.0]) / lenskit_dcg([5.0, 4.0, 3.0]))
    assert got[(16, 2)] == pytest.approx(lenskit_dcg([3.0, 4.0]) / lenskit_dcg([5.0, 4.0]))
    assert not any(u == 7 for u, _ in got)  # no truth: NaN in LensKit, not averaged


def test_replay_tests(spark):
    """RePlay tests/metrics/test_metrics.py ``test_metric`` with NDCG at [3, 5, 10]:
    [0.48975, 0.35396, 0.34018] on tests/metrics/conftest.py's recs_data and gt_data."""
    recs_data = [(1, 3, 0.6), (1, 7, 0.5), (1, 10, 0.4), (1, 11, 0.3), (1, 2, 0.2), (2, 5, 0.6), (2, 8, 0.5)]
    recs_data += [(2, 11, 0.4), (2, 1, 0.3), (2, 3, 0.2), (3, 4, 1.0), (3, 9, 0.5), (3, 2, 0.1)]
    gt = {1: [5, 6, 7, 8, 9, 10], 2: [6, 7, 4, 10, 11], 3: [1, 2, 3, 4, 5]}
    recs = spark.createDataFrame([(u, str(i), s) for u, i, s in recs_data], RECS)
    got = figures(
        evaluate(
            recs,
            judged(spark, {u: {i: 1 for i in items} for u, items in gt.items()}),
            convention="replay",
            k=[3, 5, 10],
        )
    )
    assert [mean_of(got, [1, 2, 3], k) for k in (3, 5, 10)] == pytest.approx([0.48975, 0.35396, 0.34018], abs=1e-5)


def test_cornac_tests(spark):
    """Cornac tests/cornac/metrics/test_ranking.py ``test_ndcg``: NDCG() (k=-1, the whole ranking) is 1
    for item 0 relevant and ranked first, and for items {0, 2} ranked 0, 2, 1; NDCG(k=2) is 0.63 for
    item 2 relevant ranked 1, 2, 0."""
    lists = {1: [0], 2: [0, 2, 1], 3: [1, 2, 0]}
    got = figures(
        evaluate(
            ranked(spark, lists),
            judged(spark, {1: {0: 1}, 2: {0: 1, 2: 1}, 3: {2: 1}}),
            convention="cornac",
            k=[2, None],
        )
    )
    assert got[(1, None)] == 1.0 and got[(2, None)] == 1.0
    assert round(got[(3, 2)], 2) == 0.63


def test_recbole_tests(spark):
    """RecBole tests/metrics/test_topk_metrics.py ``test_ndcg``: hits in the top 3 [[0,0,0], [1,1,1],
    [1,0,1], [0,0,1]] with [1, 3, 4, 2] positives, at k = 1, 2, 3."""
    hits, positives = [[0, 0, 0], [1, 1, 1], [1, 0, 1], [0, 0, 1]], [1, 3, 4, 2]
    lists = {u: [f"r{j}" for j in range(3)] for u in range(4)}
    rels = {}
    for u, (row, n) in enumerate(zip(hits, positives)):
        relevant = [f"r{j}" for j in range(3) if row[j]]
        rels[u] = {i: 1 for i in relevant + [f"x{j}" for j in range(n - len(relevant))]}
    got = figures(evaluate(ranked(spark, lists), judged(spark, rels), convention="recbole", k=[1, 2, 3]))
    d = [1 / np.log2(2), 1 / np.log2(3), 1 / np.log2(4)]
    expected = [[0, 0, 0], [1, 1, 1], [1, d[0] / (d[0] + d[1]), (d[0] + d[2]) / sum(d)], [0, 0, d[2] / (d[0] + d[1])]]
    assert [[got[(u, k)] for k in (1, 2, 3)] for u in range(4)] == [pytest.approx(row) for row in expected]


def test_recommenders_tests(spark):
    """recommenders tests/unit/recommenders/evaluation/test_python_evaluation.py ``test_python_ndcg_at_k``
    on conftest.py's rating_true / rating_pred / rating_nohit: 1.0 for the truth as its own prediction,
    0.0 without hits, 0.38172 (binary relevance: every rating_true row relevant), and the Wikipedia
    example (raw ratings as gains, log2 discount) 0.785 at k=6. NDCG is the same under any log base, so
    the preset's natural log (discfun_type="loge") gives the log2 case's figure too."""
    users = [1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1, 1]
    true_items = [3, 1, 4, 5, 6, 7, 2, 5, 6, 8, 9, 10, 11, 12, 13, 14, 1, 2]
    ratings = [3, 5, 5, 3, 3, 1, 5, 5, 5, 4, 4, 3, 3, 3, 2, 1, 5, 4]
    pred_items = [12, 10, 3, 5, 11, 13, 4, 10, 7, 13, 1, 3, 5, 2, 11, 14, 3, 10]
    predictions = [12, 14, 13, 12, 11, 10, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 14, 13]
    recs = [(u, str(i), float(p)) for u, i, p in zip(users, pred_items, predictions)]
    recs += [(u + 10, str(i), float(r)) for u, i, r in zip(users, true_items, ratings)]  # truth as prediction
    recs += [(u + 20, "100", float(p)) for u, p in zip(users, predictions)]  # no hit
    recs += [(0, str(i), float(6 - i)) for i in range(6)]  # Wikipedia example
    rel = [(u + offset, str(i), 1.0) for offset in (0, 10, 20) for u, i in zip(users, true_items)]
    rel += [(0, str(i), float(r)) for i, r in enumerate([3, 2, 3, 0, 1, 2, 3, 2])]
    result = evaluate(
        spark.createDataFrame(recs, RECS), spark.createDataFrame(rel, REL), convention="recommenders", k=[6, 10]
    )
    got = figures(result)
    assert mean_of(got, [11, 12, 13], 10) == pytest.approx(1.0)
    assert mean_of(got, [21, 22, 23], 10) == 0.0
    assert mean_of(got, [1, 2, 3], 10) == pytest.approx(0.38172, abs=1e-4)
    assert got[(0, 6)] == pytest.approx(0.785, abs=1e-3)


def test_spark_ranking_metrics_suite(spark):
    """Spark mllib RankingMetricsSuite: "Ranking metrics: NDCG" (binary: ndcgAt 3, 5, 10 = 1/3, 0.328788,
    0.487913), the graded test with relevance values (0.511959, 0.487806, 0.518700 through 2^rel - 1)
    and SPARK-14886 (few predictions: ndcgAt(1) = 0.5, ndcgAt(2) = 0.30657)."""
    predictions = {1: [1, 6, 2, 7, 8, 3, 9, 10, 4, 5], 2: [4, 1, 5, 6, 2, 7, 3, 8, 9, 10], 3: [1, 2, 3, 4, 5]}
    labels = {1: dict.fromkeys([1, 2, 3, 4, 5], 1), 2: dict.fromkeys([1, 2, 3], 1)}
    grades = {11: dict(zip([1, 2, 3, 4, 5], [3, 2, 1, 1, 1])), 12: dict(zip([1, 2, 3], [2, 0, 0]))}
    lists = {**predictions, **{u + 10: items for u, items in predictions.items()}, 21: [1, 6, 2]}
    rels = {**labels, **grades, 21: labels[1], 22: labels[2]}
    got = figures(evaluate(ranked(spark, lists), judged(spark, rels), convention="spark", k=[1, 2, 3, 5, 10]))
    assert [mean_of(got, [1, 2, 3], k) for k in (3, 5, 10)] == pytest.approx([1 / 3, 0.328788, 0.487913], abs=1e-5)
    assert [mean_of(got, [11, 12, 13], k) for k in (3, 5, 10)] == pytest.approx(
        [0.511959, 0.487806, 0.518700], abs=1e-5
    )
    assert [mean_of(got, [21, 22], k) for k in (1, 2)] == pytest.approx([0.5, 0.30657], abs=1e-5)
