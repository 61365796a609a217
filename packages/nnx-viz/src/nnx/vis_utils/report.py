"""Classification outcomes from class labels: the confusion matrix (a Plotly heatmap) and
the per-class report (a pandas DataFrame, no Plotly needed), both from one count."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from nnx.extend import check_choice
from nnx.vis_utils.inputs import label_names, label_pair
from nnx.viz import extras

__all__ = ["REPORT_COLUMNS", "classification_report", "confusion_counts", "confusion_matrix"]

#: The report's columns, in order.
REPORT_COLUMNS = ("precision", "recall", "f1-score", "support")


def confusion_counts(true: np.ndarray, pred: np.ndarray, classes: list[int]) -> np.ndarray:
    """``counts[i, j]``: samples of class ``classes[i]`` predicted as ``classes[j]``
    (samples whose true or predicted class is not in ``classes`` are left out)."""
    position = {c: i for i, c in enumerate(classes)}
    counts = np.zeros((len(classes), len(classes)), dtype=np.int64)
    for t, p in zip(true.tolist(), pred.tolist(), strict=True):
        if t in position and p in position:
            counts[position[t], position[p]] += 1
    return counts


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    # 0 where the denominator is 0 (a class never predicted / never present), as
    # scikit-learn's zero_division=0 reports it, instead of a NaN in the table.
    out = np.zeros(num.shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def classification_report(y_true: Any, y_pred: Any, *, labels: Sequence[int] | None = None,
                          target_names: Sequence[str] | None = None) -> Any:
    """Precision, recall, F1 and support per class, then the macro and support-weighted
    averages, as a pandas DataFrame indexed by class name ("macro avg", "weighted avg");
    the accuracy over the listed classes is ``report.attrs["accuracy"]``."""
    owner = "nnx.vis_utils.VisUtils.classification_report"
    pd = extras.pandas(owner)
    true, pred, classes = label_pair(owner, y_true, y_pred, labels)
    names = label_names(owner, classes, target_names)
    counts = confusion_counts(true, pred, classes)
    hits = np.diag(counts).astype(np.float64)
    support = counts.sum(axis=1)
    precision = _ratio(hits, counts.sum(axis=0).astype(np.float64))
    recall = _ratio(hits, support.astype(np.float64))
    f1 = _ratio(2 * precision * recall, precision + recall)
    rows = [[p, r, f, int(n)] for p, r, f, n in zip(precision, recall, f1, support,
                                                    strict=True)]
    total = int(support.sum())
    weights = support / total if total else np.zeros(len(classes))
    rows.append([precision.mean(), recall.mean(), f1.mean(), total])
    rows.append([float(precision @ weights), float(recall @ weights), float(f1 @ weights),
                 total])
    report = pd.DataFrame(rows, index=[*names, "macro avg", "weighted avg"],
                          columns=list(REPORT_COLUMNS))
    report["support"] = report["support"].astype("int64")
    report.attrs["accuracy"] = float(hits.sum() / total) if total else 0.0
    return report


def confusion_matrix(y_true: Any, y_pred: Any, *, labels: Sequence[int] | None = None,
                     target_names: Sequence[str] | None = None,
                     normalize: Literal["true", "pred", "all"] | None = None) -> Any:
    """The confusion matrix as a Plotly heatmap: rows the true class, columns the
    predicted one; ``normalize`` divides by each true class ("true"), each predicted
    class ("pred") or every sample ("all"). The counts (or ratios) are the trace's z."""
    owner = "nnx.vis_utils.VisUtils.confusion_matrix"
    go, _subplots = extras.plotly(owner)
    if normalize is not None:
        check_choice(f"{owner}: normalize", normalize, ("true", "pred", "all"))
    true, pred, classes = label_pair(owner, y_true, y_pred, labels)
    names = label_names(owner, classes, target_names)
    counts = confusion_counts(true, pred, classes).astype(np.float64)
    if normalize == "true":
        z = _ratio(counts, counts.sum(axis=1, keepdims=True).repeat(len(classes), axis=1))
    elif normalize == "pred":
        z = _ratio(counts, counts.sum(axis=0, keepdims=True).repeat(len(classes), axis=0))
    elif normalize == "all":
        z = counts / counts.sum() if counts.sum() else counts
    else:
        z = counts
    text = [[f"{v:.3g}" for v in row] for row in z]
    fig = go.Figure(go.Heatmap(z=z.tolist(), x=names, y=names, text=text,
                               texttemplate="%{text}", colorscale="Blues"))
    fig.update_layout(title="confusion matrix", xaxis_title="predicted", yaxis_title="true",
                      yaxis={"autorange": "reversed"})
    return fig
