"""``VisUtils``: the run-output pictures of spec §12 under one name (``from nnx import
VisUtils``), each a plain function of this package."""

from __future__ import annotations

from nnx.vis_utils.chart import run_chart, write_run_chart
from nnx.vis_utils.curves import history_curves, training_curves
from nnx.vis_utils.report import classification_report, confusion_matrix
from nnx.vis_utils.runs_report import runs_report, runs_report_figure, write_runs_report
from nnx.vis_utils.tsne import two_dim_tsne_checkpoint_logits

__all__ = ["VisUtils"]


class VisUtils:
    """Training curves (from a run, or record by record from its history), the run chart
    (§6.4), the runs report (several runs on one page), the confusion matrix, the
    classification report (a DataFrame: no Plotly needed) and the t-SNE of a
    checkpoint's logits. Every figure is Plotly; each method raises an ImportError naming
    its extra before any work when one is missing."""

    training_curves = staticmethod(training_curves)
    history_curves = staticmethod(history_curves)
    run_chart = staticmethod(run_chart)
    write_run_chart = staticmethod(write_run_chart)
    runs_report = staticmethod(runs_report)
    runs_report_figure = staticmethod(runs_report_figure)
    write_runs_report = staticmethod(write_runs_report)
    confusion_matrix = staticmethod(confusion_matrix)
    classification_report = staticmethod(classification_report)
    two_dim_tsne_checkpoint_logits = staticmethod(two_dim_tsne_checkpoint_logits)
