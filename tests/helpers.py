"""Small builders shared by the tests."""

from __future__ import annotations

import math
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np
from pyspark.sql import DataFrame, SparkSession

RECS_SCHEMA = "user_id int, item_id string, score double"
REL_SCHEMA = "user_id int, item_id string, relevance double"
#: JVM flags for every JVM the suite starts, in process or in a process of its own (the suite is
#: CPU-bound on 2 cores): the client compiler only and the serial collector (a short run costs
#: half the CPU: 15 s instead of 29 s for the README's sample); no code-cache sweeping (the
#: session's long life recompiled what the sweeper threw away: 12-15% of its CPU); no bytecode
#: verification of Spark's own jars. None changes a result, a signal or an exit code.
QUICK_JVM = (
    "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UseCodeCacheFlushing -XX:ReservedCodeCacheSize=512m "
    "-XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote"
)

PER_USER_SCHEMA = (
    "user_id int, k int, cg double, dcg double, idcg double, ndcg double, n_recommended int, n_relevant int"
)


def ranked_lists(spark: SparkSession, lists: Dict[int, Sequence], item_type: str = "string") -> DataFrame:
    """Recommendations from {user: [item at rank 1, item at rank 2, ...]} with descending scores."""
    rows = [(u, item, float(len(items) - i)) for u, items in lists.items() for i, item in enumerate(items)]
    return spark.createDataFrame(rows, f"user_id int, item_id {item_type}, score double")


def judged(spark: SparkSession, rels: Dict[int, Dict], item_type: str = "string") -> DataFrame:
    rows = [(u, item, float(r)) for u, m in rels.items() for item, r in m.items()]
    return spark.createDataFrame(rows, f"user_id int, item_id {item_type}, relevance double")


def dcg(gains: Iterable[float]) -> float:
    """Reference DCG written the way the seeds write it."""
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def reference_ndcg(ranked: List, rel: Dict, k: Optional[int], exponential: bool = False) -> float:
    """Seed-004-style NDCG with an uncapped ideal cutoff, used as an independent oracle."""
    g = (lambda r: 2.0**r - 1.0) if exponential else (lambda r: r)
    cut = len(ranked) if k is None else k
    seen = set()
    gains = []
    for item in ranked[:cut]:
        gains.append(0.0 if item in seen else g(rel.get(item, 0.0)))
        seen.add(item)
    ideal = [g(r) for r in sorted(rel.values(), reverse=True)[:cut]]
    idcg = dcg(ideal)
    return dcg(gains) / idcg if idcg > 0 else 0.0


def random_graded(seed, users=40, items=60, list_length=25, judged_per_user=15, ties=False):
    """{user: {item: score}} and {user: {item: grade 0-4}}; user 1 has only 0 grades."""
    rng = np.random.default_rng(seed)
    recs, rels = {}, {}
    for u in range(users):
        chosen = rng.choice(items, size=list_length, replace=False)
        scores = rng.integers(0, 5, size=list_length) if ties else rng.permutation(list_length) + rng.random()
        recs[u] = {f"d{int(i):03d}": float(s) for i, s in zip(chosen, scores)}
        judged_items = rng.choice(items, size=judged_per_user, replace=False)
        rels[u] = {f"d{int(i):03d}": int(rng.integers(0, 5)) for i in judged_items}
    if users > 3:
        rels[1] = {k: 0 for k in rels[1]}  # a user with no positive relevance (IDCG = 0)
    return recs, rels


def frames(spark, recs, rels):
    """The dicts of :func:`random_graded` as (recommendations, relevance) DataFrames."""
    rec_rows = [(u, i, s) for u, m in recs.items() for i, s in m.items()]
    rel_rows = [(u, i, float(r)) for u, m in rels.items() for i, r in m.items()]
    return (
        spark.createDataFrame(rec_rows, "user_id int, item_id string, score double"),
        spark.createDataFrame(rel_rows, "user_id int, item_id string, relevance double"),
    )


def trec_tables(spark, data_dir):
    """trec_eval's own test run and judgements, as (results, qrels) DataFrames."""
    results = spark.read.csv(
        str(data_dir / "trec_eval" / "results.test"),
        sep="\t",
        schema="user_id string, q0 string, item_id string, rank int, score double, tag string",
        ignoreLeadingWhiteSpace=True,
        ignoreTrailingWhiteSpace=True,
    )
    qrels = spark.read.csv(
        str(data_dir / "trec_eval" / "qrels.test"),
        sep=" ",
        schema="user_id string, iteration string, item_id string, relevance double",
    )
    return results, qrels


def trec_expected(path, per_topic):
    """{(topic, k): ndcg_cut figure} from a trec_eval output; the mean (topic "all") or the per-topic ones."""
    expected = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts and parts[0].startswith("ndcg_cut_"):
            expected[(parts[1], int(parts[0].rsplit("_", 1)[1]))] = float(parts[2])
    return {key: v for key, v in expected.items() if (key[0] != "all") == per_topic}


def trec_ndcg_expected(path):
    """{(topic, k): figure} of trec_eval's ``ndcg_cut_k`` lines and, as k None, its ``ndcg`` line (no cutoff)."""
    expected = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == "ndcg":
            expected[(parts[1], None)] = float(parts[2])
        elif parts and parts[0].startswith("ndcg_cut_"):
            expected[(parts[1], int(parts[0].rsplit("_", 1)[1]))] = float(parts[2])
    return expected


def browser(test):
    """Marks a test that renders a page in Debian's headless Chromium (skipped where it is missing)."""
    import shutil

    import pytest

    missing = shutil.which("chromium") is None
    return pytest.mark.browser(
        pytest.mark.skipif(missing, reason="Debian's chromium is not installed (.ci/run installs it)")(test)
    )


def chromium_dom(path, folder, *flags: str) -> str:
    """The DOM of the page at ``path`` after headless Chromium ran it (its own profile in ``folder``)."""
    import subprocess

    return subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
         "--disable-background-networking", "--disable-component-update", f"--user-data-dir={folder / 'c'}",
         *flags, "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip


def layout_at(page: str, folder, width: int = 1280, height: int = 800) -> dict:
    """Render ``page`` in headless Chromium in a ``width`` x ``height`` window: the page's own
    width (``scroll_width``: past ``width``, something runs off the right edge) and the bottom of
    the verdict box (``verdict_bottom``: within ``height``, it is on the first screen)."""
    import json
    import re

    probe = """<script>
    const v = document.getElementById("verdict");
    document.body.setAttribute("data-layout", JSON.stringify({
      scroll_width: document.documentElement.scrollWidth,
      verdict_bottom: v ? v.getBoundingClientRect().bottom : null}));
    </script></body>"""
    path = folder / "layout.html"
    path.write_text(page.replace("</body>", probe))
    dom = chromium_dom(path, folder, f"--window-size={width},{height}")
    found = re.search(r'data-layout="([^"]*)"', dom)
    assert found, dom[:2000]
    import html

    return json.loads(html.unescape(found.group(1)))


def texts_outside_svgs(page: str, folder, count: str):
    """Render ``page`` in headless Chromium: (the texts drawn outside their SVG's width, the
    number of elements matching the CSS selector ``count``)."""
    import html
    import json
    import re

    probe = """<script>
    const out = [];
    for (const svg of document.querySelectorAll("svg")) {
      const width = svg.width.baseVal.value;
      for (const t of svg.querySelectorAll("text")) {
        const b = t.getBBox();
        if (b.x < -0.5 || b.x + b.width > width + 0.5) out.push(t.textContent);
      }
    }
    document.body.setAttribute("data-overflow", JSON.stringify(out));
    document.body.setAttribute("data-count", document.querySelectorAll(SELECTOR).length);
    </script></body>""".replace("SELECTOR", json.dumps(count))
    path = folder / "probe.html"
    path.write_text(page.replace("</body>", probe))
    dom = chromium_dom(path, folder)
    overflow = re.search(r'data-overflow="([^"]*)"', dom)
    counted = re.search(r'data-count="([0-9]+)"', dom)
    assert overflow and counted, dom[:2000]
    return json.loads(html.unescape(overflow.group(1))), int(counted.group(1))


def overlapping_texts(page: str, folder):
    """Render ``page`` in headless Chromium: the texts of each SVG that overlap another text, or
    that a chart's line (``polyline``) crosses, as Chromium lays them out ([text, what it meets])."""
    import html
    import json
    import re

    probe = """<script>
    const found = [];
    const inside = (b, x, y) => x > b.x + 1 && x < b.x + b.width - 1 && y > b.y + 1 && y < b.y + b.height - 1;
    for (const svg of document.querySelectorAll("svg")) {
      const texts = [...svg.querySelectorAll("text")].map(t => [t, t.getBBox()]).filter(([, b]) => b.width > 0);
      texts.forEach(([t, b], i) => texts.slice(i + 1).forEach(([u, c]) => {
        if (b.x < c.x + c.width - 1 && c.x < b.x + b.width - 1 && b.y < c.y + c.height - 1 && c.y < b.y + b.height - 1)
          found.push([t.textContent, u.textContent]);
      }));
      for (const line of svg.querySelectorAll("polyline")) {
        const p = line.getAttribute("points").trim().split(/\\s+/).map(xy => xy.split(",").map(Number));
        for (const [t, b] of texts) {
          let hit = false;
          for (let i = 0; i + 1 < p.length && !hit; i++) {
            const n = Math.ceil(Math.hypot(p[i + 1][0] - p[i][0], p[i + 1][1] - p[i][1]));
            for (let s = 0; s <= n && !hit; s++)
              hit = inside(b, p[i][0] + (p[i + 1][0] - p[i][0]) * s / n, p[i][1] + (p[i + 1][1] - p[i][1]) * s / n);
          }
          if (hit) found.push([t.textContent, "a " + line.getAttribute("class") + " line"]);
        }
      }
    }
    document.body.setAttribute("data-overlaps", JSON.stringify(found));
    </script></body>"""
    path = folder / "overlaps.html"
    path.write_text(page.replace("</body>", probe))
    dom = chromium_dom(path, folder)
    found = re.search(r'data-overlaps="([^"]*)"', dom)
    assert found, dom[:2000]
    return json.loads(html.unescape(found.group(1)))
