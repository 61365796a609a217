"""``nnx runs report``: every run under the root or the named ones (ids or unique
prefixes, as ``nnx runs show`` resolves them); exit 1 with nothing written for an unknown
id, an ambiguous prefix or a damaged run; every string from a run HTML-escaped.
(Without nnx-viz, the install hint: nnx-core's tests/surface/test_run_chart_seam.py.)"""

from __future__ import annotations

import json

import pytest
from _runs_tiny import report_runs

from nnx.cli import main
from nnx.vis_utils.runs_report import FIGURE_ID

HOSTILE = "<script>alert('owned')</script> & \"quoted\""


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """Three tiny runs whose data id is a hostile string, made once for the module."""
    where = tmp_path_factory.mktemp("cli")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(where)
        runs = report_runs(data_id=HOSTILE)
    return where / "runs", [run.id for run in runs]


def report(root, *args):
    return main(["runs", "report", *args, "--root", str(root)])


def drawn_runs(page):
    """The run ids the page's figure draws (each trace's meta), in order of appearance."""
    text = page.read_text(encoding="utf-8")
    start = text.index(f'Plotly.newPlot(                        "{FIGURE_ID}"')
    data, _ = json.JSONDecoder().raw_decode(text, text.index("[", start))
    return list(dict.fromkeys(t["meta"]["run"] for t in data))


def test_every_run_under_the_root_by_default(root, tmp_path, capsys):
    base, ids = root
    out = tmp_path / "report.html"
    assert report(base, "-o", str(out)) == 0
    assert f"report: {out.resolve()} (3 runs)" in capsys.readouterr().out
    assert drawn_runs(out) == sorted(ids)  # the root's runs, in id order


def test_named_runs_by_id_or_unique_prefix(root, tmp_path):
    base, ids = root
    out = tmp_path / "two.html"
    assert report(base, ids[2][:12], ids[0], ids[2], "-o", str(out)) == 0
    assert drawn_runs(out) == [ids[2], ids[0]]  # as named; a run named twice once


def test_every_string_from_a_run_is_escaped(root, tmp_path):
    base, ids = root
    out = tmp_path / "report.html"
    assert report(base, *ids[:2], "-o", str(out)) == 0
    page = out.read_text(encoding="utf-8")
    assert "<script>alert(" not in page and "&quot;quoted&quot;" in page
    assert "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt; &amp;" in page


@pytest.mark.parametrize("name", ["0" * 32, "not/a/run id"])
def test_an_unknown_or_malformed_id_writes_nothing(root, tmp_path, capsys, name):
    base, ids = root
    out = tmp_path / "report.html"
    out.write_text("an earlier report", encoding="utf-8")
    assert report(base, ids[0], name, "-o", str(out)) == 1
    assert capsys.readouterr().err.strip()
    assert out.read_text(encoding="utf-8") == "an earlier report"  # left as it was


def test_an_ambiguous_prefix_writes_nothing(tmp_path, capsys):
    for name in ("abcd0001", "abcd0002"):  # what matching_run_ids counts as two runs
        (tmp_path / "runs" / name / "checkpoints").mkdir(parents=True)
    out = tmp_path / "report.html"
    assert report(tmp_path / "runs", "abcd", "-o", str(out)) == 1
    assert "ambiguous" in capsys.readouterr().err and not out.exists()


def test_a_damaged_run_refuses_the_whole_report(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = report_runs()
    damaged = runs[1]
    (damaged.path / "run.yaml").write_text("[not: a configuration", encoding="utf-8")
    capsys.readouterr()
    out = tmp_path / "report.html"
    assert main(["runs", "report", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"run {damaged.id} is damaged" in err and "run.yaml" in err
    assert "nothing written" in err and not out.exists()
    # Named, the damaged run refuses the report too; the others alone are reported.
    assert main(["runs", "report", damaged.id, runs[0].id, "-o", str(out)]) == 1
    assert not out.exists()
    assert main(["runs", "report", runs[0].id, runs[2].id, "-o", str(out)]) == 0
    assert drawn_runs(out) == [runs[0].id, runs[2].id]


def test_no_runs_under_the_root_writes_nothing(tmp_path, capsys):
    out = tmp_path / "report.html"
    assert report(tmp_path / "runs", "-o", str(out)) == 1
    assert "no runs under" in capsys.readouterr().err and not out.exists()
