"""Without Plotly / pandas / scikit-learn, each VisUtils entry point raises an ImportError
naming the install before any work (its arguments are never looked at: an object that is
no run or no labels would otherwise be refused with a TypeError / LabelError), and the
classification report needs no Plotly (spec §12). The absence is simulated here."""

from __future__ import annotations

import pytest
from _viz_tiny import hide

from nnx.vis_utils import VisUtils

NOT_A_RUN = object()

CALLS = {
    "training_curves": lambda: VisUtils.training_curves(NOT_A_RUN),
    "history_curves": lambda: VisUtils.history_curves(NOT_A_RUN),
    "run_chart": lambda: VisUtils.run_chart(NOT_A_RUN),
    "write_run_chart": lambda: VisUtils.write_run_chart(NOT_A_RUN, "never.html"),
    "confusion_matrix": lambda: VisUtils.confusion_matrix([0.5], [[1]]),
    "classification_report": lambda: VisUtils.classification_report([0.5], [[1]]),
    "two_dim_tsne_checkpoint_logits": lambda: VisUtils.two_dim_tsne_checkpoint_logits(
        NOT_A_RUN, NOT_A_RUN),
}

CASES = [
    *[(name, "plotly", "pip install plotly") for name in CALLS
      if name != "classification_report"],
    ("classification_report", "pandas", 'pip install "nnx-viz[tabular]"'),
    ("two_dim_tsne_checkpoint_logits", "sklearn", 'pip install "nnx-viz[tsne]"'),
]


@pytest.mark.parametrize(("name", "package", "install"), CASES)
def test_a_missing_package_is_named_before_any_work(monkeypatch, tmp_path, name, package,
                                                    install):
    monkeypatch.chdir(tmp_path)
    hide(monkeypatch, package)
    with pytest.raises(ImportError, match=install.replace("[", r"\[").replace("]", r"\]")):
        CALLS[name]()
    assert not (tmp_path / "never.html").exists()


def test_the_classification_report_needs_no_plotly(monkeypatch):
    pytest.importorskip("pandas")  # the tabular extra: absent where nnx-viz is alone
    hide(monkeypatch, "plotly")
    report = VisUtils.classification_report([0, 1, 1], [0, 1, 0])
    assert list(report.index) == ["0", "1", "macro avg", "weighted avg"]
