"""A run of an add-on whose distribution is not installed, read from its plain files.

``nnx runs list`` and ``nnx runs show`` read every run under a root, and a
core-only install (a downstream library pins only nnx-core) may hold a run of an
add-on net: nnx-lm's ``TRANSFORMER``. Such a run cannot become an
:class:`~nnx._persistence.run.NNRun`, whose net params class lives in the add-on,
yet it is neither damage nor absent: it is read here without the add-on. run.yaml
is a plain document, checked to hash to the run's directory name (the run id is the
md5 of that document, :mod:`nnx._foundation.identity`); the loop's params are core's;
LAST's and BEST's records come through the safe reader and the history through
core's readers, so nothing is unpickled and no tensor is read. The net is shown by
the name run.yaml records, with the distribution that reads it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnx._foundation.bounded import load_yaml
from nnx._foundation.hashing import md5_hex
from nnx._foundation.plugins import MissingDistributionError
from nnx._foundation.records import NNIterationDataPoint
from nnx._foundation.validation import check_run_id
from nnx._journal.reader import epoch_ends
from nnx._persistence.checkpoint import CHECKPOINT_FORMAT
from nnx._persistence.checkpoint_format import read_record
from nnx._persistence.history_completeness import read_mark
from nnx._persistence.history_ends import check_history_ends
from nnx._persistence.run_damage import reading
from nnx._persistence.run_render import best_line, loop_lines, render_lines, score_label
from nnx.params.train import NNTrainParams
from nnx.params.trainer import NNTrainerParams

__all__ = ["AddOnRun", "best_score", "read_add_on_run", "read_record_of", "render_add_on_run"]


def read_record_of(run_id: str, path: Path) -> Mapping[str, Any]:
    """A checkpoint's record through the safe reader; anything else is damage."""
    with reading(run_id, path):
        record = read_record(path)
        if record.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"not an NNx checkpoint ({CHECKPOINT_FORMAT})")
        int(record["epoch"])
    return record


def best_score(run_id: str, path: Path) -> tuple[int | None, str | None, float | None]:
    """(epoch, what it scores, value) of the BEST at ``path``; Nones without one."""
    if not path.is_file():
        return None, None, None
    record = read_record_of(run_id, path)
    with reading(run_id, path):
        idp = None if record.get("idp") is None else NNIterationDataPoint.from_state(
            record["idp"])
    found = score_label(idp, named_monitor=bool(record.get("named_monitor", False)),
                        monitor_value=record.get("monitor_value"))
    what, value = (None, None) if found is None else found
    return int(record["epoch"]), what, value


@dataclass(frozen=True)
class AddOnRun:
    """What core reads of a run whose configuration needs an absent distribution; the
    attributes ``nnx runs list`` reads of an NNRun, under the same names."""

    id: str
    root: Path
    net: str  # the registered name run.yaml records ("TRANSFORMER")
    distribution: str  # the distribution that provides it ("nnx-lm")
    loop_params: NNTrainParams | NNTrainerParams
    salt: str | None
    loss: str | None  # the loss run.yaml records ("CROSS_ENTROPY")

    @property
    def path(self) -> Path:
        return self.root / self.id

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    @property
    def net_label(self) -> str:
        return f"{self.net} (needs {self.distribution})"

    def epoch_records(self) -> list[NNIterationDataPoint]:
        """The last record of each committed epoch, as NNRun's are."""
        last = self.checkpoints_dir / "last.pt"
        mark = None
        if last.is_file():
            with reading(self.id, last):
                mark = read_mark(last)
        check_history_ends(self.id, self.path, mark)  # a history cut short is damage
        committed = None if mark is None else mark.epoch
        if committed is None and (self.path / ".history-committed-by-last").is_file():
            return []  # before the first LAST nothing is committed
        history = self.path / "history"
        with reading(self.id, history if (history / "journal.json").is_file()
                     else self.path / "idps.csv"):
            return epoch_ends(self.path, committed)


def read_add_on_run(doc: Any, path: Path, root: str | os.PathLike[str],
                    missing: MissingDistributionError) -> AddOnRun:
    """The run the run.yaml document ``doc`` at ``path`` describes, when rebuilding it
    raised ``missing``; ValueError (damage, under the caller's ``reading``) when the
    document is not a run configuration or does not hash to the directory's name."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("model"), Mapping) or (
            "train" not in doc and "trainer" not in doc):
        raise ValueError("not an NNx run configuration")
    found, name = md5_hex(doc), path.resolve().name
    if found != name:
        raise ValueError(f"it hashes to {found}, not to its directory name {name}")
    net = doc["model"].get("net")
    loop = (NNTrainerParams.from_state(doc["trainer"]) if doc.get("trainer") is not None
            else NNTrainParams.from_state(doc["train"]))
    salt, loss = doc.get("salt"), doc["model"].get("loss")
    return AddOnRun(id=name, root=Path(root), distribution=missing.distribution,
                    net=net if isinstance(net, str) else missing.what, loop_params=loop,
                    salt=salt if isinstance(salt, str) else None,
                    loss=loss if isinstance(loss, str) else None)


def render_add_on_run(root: str | os.PathLike[str], run_id: str,
                      missing: MissingDistributionError) -> str:
    """``nnx runs show`` of the run whose loading raised ``missing``: what core can say
    without the add-on (RunDamagedError names a file that cannot be read)."""
    path = Path(root) / check_run_id("run_id", run_id)
    with reading(run_id, path / "run.yaml"):
        run = read_add_on_run(load_yaml(path / "run.yaml"), path, root, missing)
    head = [("run", run.id),
            ("net", f"{run.net} (needs {run.distribution}: pip install {run.distribution})"),
            *([("loss", run.loss)] if run.loss else []),
            *loop_lines(run.loop_params, trainer=isinstance(run.loop_params, NNTrainerParams),
                        salt=run.salt)]
    epoch, what, value = best_score(run.id, run.checkpoints_dir / "best.pt")
    if epoch is not None:
        head.append(best_line(epoch, None if what is None or value is None else (what, value)))
    return render_lines(head, run.epoch_records())
