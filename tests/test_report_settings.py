"""The report page says which convention made its figures and shows the switches as they resolved."""

from __future__ import annotations

import doctest
from html.parser import HTMLParser

from ndcg_spark import EvaluationOptions, report

METRICS = [{"k": 5, "users": 2, "mean_ndcg": 0.5, "ndcg_ci_low": None, "ndcg_ci_high": None}]


class Settings(HTMLParser):
    """Reads the page's convention line and its settings table: {switch: (value, changed)}."""

    def __init__(self):
        super().__init__()
        self.convention, self.rows, self._where, self._cells, self._changed = None, {}, None, [], False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id") in ("convention", "settings"):
            self._where = attrs["id"]
        elif tag == "tr" and self._where == "settings":
            self._cells, self._changed = [], attrs.get("class") == "changed"

    def handle_endtag(self, tag):
        if tag == "p" and self._where == "convention":
            self._where = None
        elif tag == "tr" and self._where == "settings" and self._cells and self._cells != ["switch", "value"]:
            self.rows[self._cells[0]] = (self._cells[1], self._changed)
        elif tag == "table":
            self._where = None

    def handle_data(self, data):
        if self._where == "convention":
            self.convention = data
        elif self._where == "settings":
            self._cells.append(data)


def parsed(page):
    reader = Settings()
    reader.feed(page)
    return reader


def test_report_shows_the_convention_and_its_switches_as_resolved():
    options = EvaluationOptions(convention="trec_eval", gain="exponential", gains={2: 5}, k=[5])
    page = parsed(report.render(METRICS, [], options=options))
    assert page.convention == "convention: trec_eval"
    assert set(page.rows) == set(report.CONVENTION_SWITCHES)
    # The preset's switches, an explicit override over it, and the defaults it keeps.
    assert page.rows["tie_break"] == ("item_descending", True)
    assert page.rows["whole_list"] == ("all_judged", True)
    assert page.rows["no_relevance"] == ("exclude", True)
    assert page.rows["negative_relevance"] == ("unjudged", True)
    assert page.rows["gain"] == ("exponential", True)
    assert page.rows["gains"] == ("{2 = 5}", True)
    assert page.rows["ties"] == ("item", False)
    assert page.rows["cap_ideal_at_list_length"] == ("false", False)
    assert page.rows["log_base"] == ("2", False)


def test_report_without_a_convention_says_so_and_without_options_shows_none():
    page = parsed(report.render(METRICS, [], options=EvaluationOptions(k=[5], ties="worst")))
    assert page.convention.startswith("convention: none")
    assert page.rows["ties"] == ("worst", True)
    assert all(changed is False for name, (_, changed) in page.rows.items() if name != "ties")
    bare = parsed(report.render(METRICS, []))
    assert (bare.convention, bare.rows) == (None, {})


def test_settings_table_examples():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for test in finder.find(report.settings_table, "settings_table", globs=vars(report)):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert (result.attempted, result.failed) == (3, 0)
