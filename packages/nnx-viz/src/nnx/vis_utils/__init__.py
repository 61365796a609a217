"""nnx.vis_utils: pictures of what a run produced (spec §12, §6.4), every figure Plotly.

``VisUtils`` gathers them: ``training_curves`` (per epoch, from an ``NNRun`` or a run id),
``history_curves`` (per record, from the run's history through ``nnx.history``),
``run_chart`` / ``write_run_chart`` (the §6.4 chart: whole-epoch training loss, the
monitor with its improving epochs marked, the LR; ``NNRun.chart`` and ``nnx runs show
--plot`` write it), ``runs_report`` / ``write_runs_report`` (several runs side by side on
one self-contained page: ``nnx runs report``), ``confusion_matrix``,
``classification_report`` (a pandas DataFrame, no Plotly) and
``two_dim_tsne_checkpoint_logits``. Optional packages are imported by
the call that needs them. See docs/viz.md.
"""

from nnx.vis_utils.chart import run_chart, write_run_chart
from nnx.vis_utils.curves import EpochSeries, epoch_series, history_curves, training_curves
from nnx.vis_utils.errors import GraphBatchRefusedError, LabelError
from nnx.vis_utils.report import classification_report, confusion_matrix
from nnx.vis_utils.runs_report import runs_report, runs_report_figure, write_runs_report
from nnx.vis_utils.tsne import two_dim_tsne_checkpoint_logits
from nnx.vis_utils.visutils import VisUtils

__nnx_skeleton__ = {"kind": "tool", "verb": "chart"}

__all__ = [
    "EpochSeries",
    "GraphBatchRefusedError",
    "LabelError",
    "VisUtils",
    "classification_report",
    "confusion_matrix",
    "epoch_series",
    "history_curves",
    "run_chart",
    "runs_report",
    "runs_report_figure",
    "training_curves",
    "two_dim_tsne_checkpoint_logits",
    "write_run_chart",
    "write_runs_report",
]
