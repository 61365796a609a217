"""idps.csv rendered incrementally (history_csv.IdpsCsv) is byte for byte the full render.

Each epoch's commit renders only that epoch's records; a new column, a rollback
or a replaced earlier record renders the whole file again.
"""

from __future__ import annotations

import dataclasses

from nnx._foundation.records import NNEvaluationDataPoint, NNIterationDataPoint
from nnx._journal.history_csv import IdpsCsv, render_idps_csv


def epoch(e: int, n: int = 3, *, start: int = 0, val: bool = False) -> list[NNIterationDataPoint]:
    out = []
    for b in range(n):
        last = b == n - 1
        out.append(NNIterationDataPoint(
            epoch=e, iter_idx=start + b, batch_idx=b, lr=0.1 / (e + 1), update_count=start + b,
            train_edp=NNEvaluationDataPoint(loss=1.0 / (start + b + 1), error=0.5, accuracy=0.5),
            val_edp=NNEvaluationDataPoint(loss=0.25 * e) if val and last else None))
    return out


def test_a_growing_history_renders_like_the_full_render() -> None:
    csv, idps = IdpsCsv(), []
    for e in range(4):
        idps += epoch(e, start=3 * e)
        assert csv.render(idps) == render_idps_csv(idps)


def test_a_new_column_renders_every_line_again() -> None:
    csv, idps = IdpsCsv(), epoch(0)
    csv.render(idps)
    idps += epoch(1, start=3, val=True)  # val_loss appears: earlier lines get the empty cell
    assert csv.render(idps) == render_idps_csv(idps)
    assert "val_loss" in csv.render(idps).splitlines()[0]


def test_a_rollback_or_a_replaced_record_starts_over() -> None:
    csv, idps = IdpsCsv(), epoch(0) + epoch(1, start=3)
    csv.render(idps)
    del idps[3:]  # the epoch rolled back
    assert csv.render(idps) == render_idps_csv(idps)
    idps[1] = dataclasses.replace(idps[1], lr=9.0)  # an earlier record replaced in place
    assert csv.render(idps) == render_idps_csv(idps)
    assert csv.render([]) == render_idps_csv([])
