"""What ``nnx runs list`` shows of a run read through its checkpoints (spec §4, §4.1,
§4.4): the full path, for a run without a trusted listing summary
(:mod:`nnx._persistence.run_rows` lists the others and walks the runs root).

A row reads run.yaml and metadata.yaml, LAST's and BEST's records through the
safe reader (:func:`nnx._persistence.checkpoint_format.read_record`: no tensor is read, nothing
is unpickled), LAST's manifest, attempt.json and the ends of the history
(idps.csv's header and last row, or a journal's manifest and index). The
history is never parsed whole: ``nnx runs show`` does that.

Status (documented in docs/durability.md):

* ``running`` - the run's lease (``runs/.leases/<id>.lock``) is held by a live
  process, probed without waiting and without creating the file;
* else, with provenance (attempt.json): ``committed`` when the last attempt
  completed, ``interrupted`` when it failed, was cancelled or still says
  "running" (its process is gone);
* else ``committed`` when LAST is the plan's last epoch or records a
  deliberate stop (``should_stop``: an early stop, written into LAST's
  manifest position as ``stopped``), and ``interrupted`` when there is no LAST
  or it is an earlier epoch without that mark (a kill, a failure).

A directory with no run.yaml is listed only when it is an empty reservation
(:func:`~nnx._persistence.reservation.is_empty_reservation`: a fit killed
before it wrote run.yaml): ``incomplete`` (``running`` while its lease is
held), with no net, epochs or BEST. It is not damage (a plain retry reclaims
it), so it does not change ``nnx runs list``'s exit status.

A run of an add-on that is not installed (an nnx-lm run in a core-only install) is
listed like any other, its net as ``TRANSFORMER (needs nnx-lm)``
(:mod:`nnx._persistence.add_on_run`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nnx._foundation.bounded import load_yaml
from nnx._foundation.plugins import MissingDistributionError
from nnx._foundation.safe_paths import UnsafePathError, is_link
from nnx._foundation.validation import check_run_id
from nnx._persistence.add_on_run import AddOnRun, best_score, read_add_on_run, read_record_of
from nnx._persistence.history_completeness import LastMark
from nnx._persistence.history_ends import check_history_ends
from nnx._persistence.point_manifest import manifest_path, read_point
from nnx._persistence.point_position import PLANNED_N_EPOCHS, STOPPED
from nnx._persistence.run import NNRun
from nnx._persistence.run_damage import RunDamagedError
from nnx._persistence.run_damage import reading as _reading
from nnx._persistence.run_files import check_run_files
from nnx._persistence.run_rows import RunSummary, created_at, matching_run_ids, status_of
from nnx.enums.nets import Nets

__all__ = ["RunSummary", "matching_run_ids", "summarize_run"]

def _yaml(path: Path) -> Any:
    # Bounded (a planted deep document is damage, never a RecursionError) and through
    # the C parser when PyYAML has it: run.yaml dominates a listing's cost.
    return load_yaml(path)


def _net(run: NNRun | AddOnRun) -> str:
    if isinstance(run, AddOnRun):  # TRANSFORMER (needs nnx-lm)
        return run.net_label
    net = run.model_params.net
    if isinstance(net, Nets):
        return net.name
    label = getattr(net, "label", None)  # a registered factory: id@vN
    return str(label) if label else str(getattr(net, "module", "module")).rsplit(".", 1)[-1]


def _planned(run: NNRun | AddOnRun, last: Path) -> tuple[int, bool]:
    """(the plan's end, whether LAST records a deliberate stop) as LAST's manifest
    says; the configured n_epochs and no stop without one. A manifest that is there but
    cannot be read (damaged, huge, nested too deeply, a symbolic link) is damage of the
    run, named as such (RunDamagedError), never a traceback."""
    live = manifest_path(last)
    point = None
    if live.is_file() or is_link(live):
        with _reading(run.id, live):
            point = read_point(last)
    if point is not None and isinstance(point.position.get(PLANNED_N_EPOCHS), int):
        return int(point.position[PLANNED_N_EPOCHS]), point.position.get(STOPPED) is True
    return int(run.loop_params.n_epochs), False


def summarize_run(root: str | os.PathLike[str], run_id: str) -> RunSummary:
    """One run's row; :class:`RunDamagedError` names the file that cannot be read (a
    symbolic link among the files the row reads included: never followed)."""
    path = Path(root) / check_run_id("run_id", run_id)
    try:
        check_run_files(path)
    except UnsafePathError as exc:
        raise RunDamagedError(run_id, exc.link or exc.path, str(exc)) from exc
    with _reading(run_id, path / "run.yaml"):
        doc = _yaml(path / "run.yaml")
        try:
            run: NNRun | AddOnRun = NNRun._from_document(doc, path, root)
        except MissingDistributionError as exc:  # an add-on's run, listed without it
            run = read_add_on_run(doc, path, root, exc)
    if (path / "metadata.yaml").is_file():
        with _reading(run_id, path / "metadata.yaml"):
            _yaml(path / "metadata.yaml")
    last = run.checkpoints_dir / "last.pt"
    mark = None
    if last.is_file():
        record = read_record_of(run_id, last)
        with _reading(run_id, last):
            mark = LastMark.of(record)
    check_history_ends(run.id, run.path, mark)  # a history cut short of LAST is damage
    committed = None if mark is None else mark.epoch
    epochs = 0 if committed is None else committed + 1
    planned, stopped = (_planned(run, last) if committed is not None
                        else (int(run.loop_params.n_epochs), False))
    best_epoch, what, value = best_score(run_id, run.checkpoints_dir / "best.pt")
    status = status_of(Path(run.root), run.id, epochs, planned, stopped)
    return RunSummary(run_id=run.id, created=created_at(path), net=_net(run), epochs=epochs,
                      planned=planned, status=status,
                      best_epoch=best_epoch, best_what=what, best_value=value,
                      salt=run.salt, data_id=run.loop_params.data_id)
