"""NNRun: a run's configuration, history and directory (spec §4).

``runs/<id>/run.yaml`` is the configuration and hashes to ``<id>``;
``metadata.yaml`` is the environment (never hashed); ``idps.csv`` the
per-iteration history, rewritten each epoch. Every file goes through the
atomic writer. LAST is the commit marker: loading a run drops history newer
than LAST's epoch (what a killed process may have left behind).

A run whose files cannot be read back (a garbage or too deeply nested run.yaml,
a torn idps.csv or LAST, a history LAST commits but that is gone or ends before
the record LAST commits: :mod:`nnx._persistence.history_completeness`) raises
:class:`RunDamagedError` naming the file and the cause. :meth:`NNRun.scan` lists
such runs beside the healthy ones instead of stopping at the first.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from nnx._foundation.atomic import atomic_write_text
from nnx._foundation.bounded import load_yaml
from nnx._foundation.environment import environment_snapshot
from nnx._foundation.identity import check_salt, run_id, run_identity
from nnx._foundation.locking import file_lock
from nnx._foundation.plugins import require_distribution
from nnx._foundation.records import NNIterationDataPoint
from nnx._foundation.safe_paths import UnsafePathError
from nnx._foundation.validation import check_run_id
from nnx._journal.history_csv import IdpsCsv, read_idps_csv
from nnx._journal.reader import read_epochs, read_manifest, read_tail
from nnx._persistence.best_pointer import resolve_best
from nnx._persistence.history_completeness import LastMark, check_ends_at, last_within, read_mark
from nnx._persistence.resume_status import ResumeStatus
from nnx._persistence.run_damage import DamagedRun, RunDamagedError, display_path
from nnx._persistence.run_damage import reading as _reading
from nnx._persistence.run_files import check_run_files
from nnx._persistence.run_render import render_html, render_text, score_label
from nnx._persistence.run_summary import read_summary
from nnx.enums.nets import Nets
from nnx.params.compile import CompileRecord
from nnx.params.model import NNModelParams
from nnx.params.net import NNParams
from nnx.params.train import NNTrainParams
from nnx.params.trainer import NNTrainerParams

if TYPE_CHECKING:
    from nnx._persistence.checkpoint import NNCheckpoint

__all__ = ["DEFAULT_ROOT", "DamagedRun", "NNRun", "RunDamagedError", "display_path"]

#: Where runs live, relative to the working directory.
DEFAULT_ROOT = "runs"


def _task_block(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    task = doc.get("task")
    if task is not None and not isinstance(task, Mapping):
        raise ValueError(f"its task block is a {type(task).__name__}, not a mapping")
    return task


def _trusted_summary(path: Path) -> Mapping[str, Any] | None:
    """The run's trusted listing summary when it holds what a shown run reads of its
    checkpoints (LAST's epoch and record index, BEST's row when there is a BEST); None
    sends the reader to the checkpoints."""
    body = read_summary(path)
    if body is None or not isinstance(body.get("epoch"), int) or not isinstance(
            body.get("iter_idx"), (int, type(None))):
        return None
    # A BEST the summary has no row for (one saved before manifests): read it from BEST.
    if not isinstance(body.get("best"), Mapping) and (path / "checkpoints" / "best.pt").exists():
        return None
    return body


class NNRun:
    """One configuration's run: its params, its id, its history on disk."""

    def __init__(
        self,
        *,
        model_params: NNModelParams,
        train_params: NNTrainParams | None = None,
        net_params: NNParams | None = None,
        trainer_params: NNTrainerParams | None = None,
        salt: str | None = None,
        transforms: Sequence[Any] = (),
        root: str | os.PathLike[str] = DEFAULT_ROOT,
        task: Mapping[str, Any] | None = None,
    ) -> None:
        self.model_params = model_params
        self.net_params = net_params
        self.train_params = train_params
        self.trainer_params = trainer_params
        self.salt = check_salt(salt)
        self.transforms = tuple(transforms)
        # An add-on task's configuration (Task.identity()): part of the id, None otherwise.
        self.task = None if task is None else dict(task)
        self.root = Path(root)
        self.idps: list[NNIterationDataPoint] = []
        self.metadata: dict[str, Any] = {}
        # What the run's start restored (spec §14.2): mode "fresh" until a resume from a
        # checkpoint says otherwise. A fresh run restored nothing, so its lists are empty
        # and metadata.yaml carries no ``resume`` block (NNRun.load reads it back fresh).
        self.resume_status: ResumeStatus = ResumeStatus()
        self.journal: Any = None  # the HistoryJournal when the history is a journal
        self._csv: IdpsCsv | None = None  # renders idps.csv, reusing the lines of earlier saves
        # The trusted listing summary (summary.json) when this run was read for showing
        # (``load(..., summary=True)``): it answers for LAST's and BEST's records, so
        # ``nnx runs show`` opens no checkpoint and imports no torch.
        self._summary: Mapping[str, Any] | None = None
        self.id = run_id(**self._parts())

    def _parts(self) -> dict[str, Any]:
        return {"model": self.model_params, "net": self.net_params, "train": self.train_params,
                "trainer": self.trainer_params, "salt": self.salt,
                "transforms": self.transforms, "task": self.task}

    def state(self) -> dict[str, Any]:
        """run.yaml: the configuration document the id hashes."""
        return run_identity(**self._parts())

    @property
    def loop_params(self) -> Any:
        """The params of the loop that trained the run: NNTrainParams or NNTrainerParams."""
        return self.trainer_params if self.trainer_params is not None else self.train_params

    @property
    def path(self) -> Path:
        return self.root / self.id

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    def exists(self) -> bool:
        return (self.path / "run.yaml").is_file()

    # -- writing ----------------------------------------------------------------------
    def save_config(self) -> None:
        """run.yaml and metadata.yaml (the environment, refreshed on every save)."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.metadata = {**self.metadata, "environment": environment_snapshot()}
        with file_lock(self.path / ".run.lock", root=self.root):
            atomic_write_text(self.path / "run.yaml",
                              yaml.safe_dump(self.state(), sort_keys=False))
            atomic_write_text(self.path / "metadata.yaml",
                              yaml.safe_dump(self.metadata, sort_keys=False))

    def save_metadata(self) -> None:
        """metadata.yaml alone, as it is (a commit's update of the compile record)."""
        with file_lock(self.path / ".run.lock", root=self.root):
            atomic_write_text(self.path / "metadata.yaml",
                              yaml.safe_dump(self.metadata, sort_keys=False))

    @property
    def compile(self) -> CompileRecord | None:
        """What ``train(compile=...)`` asked for and what took effect, as of the last
        commit (metadata.yaml's record); None for a run trained without it."""
        state = self.metadata.get("compile")
        return None if state is None else CompileRecord.from_state(state)

    @property
    def has_journal(self) -> bool:
        return (self.path / "history" / "journal.json").is_file() or self.journal is not None

    def save_history(self) -> None:
        """idps.csv, rewritten whole; a journal run's history is never rewritten."""
        text = self.history_text(self.idps)
        if text is not None:
            self.write_history_text(text)

    def history_text(self, records: list[NNIterationDataPoint]) -> str | None:
        """idps.csv's text for ``records`` (None for a journal run). Renders only the
        records it has not rendered before, so call it from one thread (the training
        thread: a record computes its deferred fields where it is rendered)."""
        if self.has_journal:
            return None
        if self._csv is None:
            self._csv = IdpsCsv()
        return self._csv.render(records)

    def write_history_text(self, text: str) -> None:
        """idps.csv holds ``text`` (atomically, under the run's lock)."""
        with file_lock(self.path / ".run.lock", root=self.root):
            atomic_write_text(self.path / "idps.csv", text)

    def save(self) -> None:
        self.save_config()
        self.save_history()

    # -- reading ----------------------------------------------------------------------
    @classmethod
    def load(cls, run_id: str, *, root: str | os.PathLike[str] = DEFAULT_ROOT,
             summary: bool = False) -> NNRun:
        """Read a run back from disk; needs nothing registered and builds no model.

        ``summary=True`` (``nnx runs show``): where the run's listing summary is trusted
        (:func:`~nnx._persistence.run_summary.read_summary`: its digest verifies and
        LAST's live manifest names the point it describes), LAST's mark and BEST's score
        come from it and no checkpoint is opened; otherwise they are read as without it.

        Raises FileNotFoundError without a run.yaml, :class:`RunDamagedError`
        (a ValueError) naming the file when one of the run's files cannot be read, and
        ``UnsafePathError`` naming the link when the run directory or a file it reads is
        a symbolic link (nothing is read then).
        """
        check_run_id("run_id", run_id)
        run_id = resolve_best(run_id, root)  # runs/best is read by the name it holds
        path = check_run_files(Path(root) / run_id)
        if not (path / "run.yaml").is_file():
            raise FileNotFoundError(f"no run {run_id!r} under {root} (no run.yaml)")
        with _reading(run_id, path / "run.yaml"):
            run = cls._from_config(path, root)
        meta = path / "metadata.yaml"
        if meta.is_file():
            with _reading(run_id, meta):
                run.metadata = load_yaml(meta) or {}
                if not isinstance(run.metadata, dict):
                    raise ValueError(f"not a mapping but a {type(run.metadata).__name__}")
                if run.metadata.get("resume") is not None:
                    run.resume_status = ResumeStatus.from_state(run.metadata["resume"])
        if summary:
            run._summary = _trusted_summary(path)
        mark = run.committed_mark()
        last_epoch = None if mark is None else mark.epoch
        # Under the history protocol LAST commits the history: before the first LAST, a
        # killed process's history (epoch 0 written, LAST not yet) is all uncommitted.
        uncommitted = last_epoch is None and (path / ".history-committed-by-last").is_file()
        if run.has_journal:
            with _reading(run_id, path / "history"):
                manifest = read_manifest(path)
                retention = 1000 if manifest is None else manifest.retention
                run.idps = [] if uncommitted else read_tail(path, retention, last_epoch)
            if mark is not None:  # the tail's last record is LAST's, or records are lost
                check_ends_at(run_id, path / "history" / "journal.json",
                              last_within(run.idps[-1:], mark.epoch), mark)
            return run
        history = path / "idps.csv"
        if last_epoch is not None and not history.is_file():
            # History is written before LAST: committed epochs without it are lost records,
            # never an empty history to report silently.
            raise RunDamagedError(run_id, history, f"missing, but LAST commits epoch "
                                                   f"{last_epoch}")
        if history.is_file() and not uncommitted:
            with _reading(run_id, history):
                run.idps = read_idps_csv(history.read_text(encoding="utf-8"))
        if mark is not None:
            run.idps = [idp for idp in run.idps if idp.epoch <= mark.epoch]
            check_ends_at(run_id, history, last_within(run.idps[-1:], mark.epoch), mark)
        return run

    @classmethod
    def _from_config(cls, path: Path, root: str | os.PathLike[str]) -> NNRun:
        """The run run.yaml describes, checked to hash to its directory's name."""
        doc = load_yaml(path / "run.yaml")  # bounded: a planted deep document is damage
        return cls._from_document(doc, path, root)

    @classmethod
    def _from_document(cls, doc: Any, path: Path, root: str | os.PathLike[str]) -> NNRun:
        """The run a parsed run.yaml document describes, checked to hash to ``path``'s name."""
        if not isinstance(doc, Mapping) or "model" not in doc or (
                "train" not in doc and "trainer" not in doc):
            raise ValueError("not an NNx run configuration")
        model = NNModelParams.from_state(doc["model"])
        if doc.get("net") is not None and not isinstance(model.net, Nets):
            raise ValueError(f"it records net params for a {model.net.kind} model, which has "
                             "none")
        net = None if doc.get("net") is None else NNParams.resolve_from_state(doc["net"], model.net)
        trainer: NNTrainerParams | None = None
        if doc.get("trainer") is not None:
            trainer = NNTrainerParams.from_state(doc["trainer"])
        run = cls(model_params=model, net_params=net,
                  train_params=None if "train" not in doc else NNTrainParams.from_state(
                      doc["train"]),
                  trainer_params=trainer, salt=doc.get("salt"),
                  transforms=doc.get("transforms", ()), root=root, task=_task_block(doc))
        run_dir_name = path.resolve().name
        if run.id != run_dir_name:
            raise ValueError(f"it hashes to {run.id}, not to its directory name {run_dir_name}")
        return run

    @property
    def provenance(self) -> Any:
        """The run's provenance (fingerprint, manifest, attempt), or None without one."""
        # On first use: a fit without provenance= never loads its readers (issue 38).
        from nnx.provenance.reading import read_provenance

        return read_provenance(self.path) if self.path.is_dir() else None

    def committed_epoch(self) -> int | None:
        """LAST's epoch: the last committed epoch, or None before the first commit."""
        mark = self.committed_mark()
        return None if mark is None else mark.epoch

    def committed_mark(self) -> LastMark | None:
        """Where LAST says the committed history ends (its epoch and last record's
        iter_idx), or None before the first commit."""
        if self._summary is not None:
            return LastMark(self._summary["epoch"], self._summary["iter_idx"])
        last = self.checkpoints_dir / "last.pt"
        if not last.is_file():
            return None
        with _reading(self.id, last):  # the one safe reader: nothing unpickled, no tensor read
            mark = read_mark(last)
        return mark

    @classmethod
    def scan(cls, root: str | os.PathLike[str] = DEFAULT_ROOT
             ) -> tuple[list[NNRun], list[DamagedRun]]:
        """Every run under ``root`` (a directory with a run.yaml), sorted by id: the
        runs that load, and the damaged ones with the file and the reason."""
        base = Path(root)
        if not base.is_dir():
            return [], []
        runs, damaged = [], []
        for entry in sorted(base.iterdir()):
            if entry.name.startswith(".") or entry.is_symlink() or not entry.is_dir():
                continue
            if (entry / "run.yaml").is_file():
                try:
                    runs.append(cls.load(entry.name, root=root))
                except RunDamagedError as exc:
                    damaged.append(DamagedRun(exc.run_id, exc.path, exc.reason))
                except UnsafePathError as exc:  # a planted link: never read, listed as damage
                    damaged.append(DamagedRun(entry.name, exc.link or exc.path, str(exc)))
        return runs, damaged

    @classmethod
    def all(cls, *, root: str | os.PathLike[str] = DEFAULT_ROOT) -> list[NNRun]:
        """Every readable run under ``root``, sorted by id. Damaged runs are skipped
        with one RuntimeWarning naming them; :meth:`scan` returns them too."""
        runs, damaged = cls.scan(root)
        if damaged:
            names = "; ".join(f"{d.run_id} ({display_path(d.path)}: {d.reason})"
                              for d in damaged)
            warnings.warn(f"NNRun.all skipped {len(damaged)} damaged run(s) under "
                          f"{os.fspath(root)}: {names}; NNRun.scan lists them",
                          RuntimeWarning, stacklevel=2)
        return runs

    # -- views ------------------------------------------------------------------------
    def epoch_records(self) -> list[NNIterationDataPoint]:
        """The last record of each epoch (the one carrying validation)."""
        if self.has_journal and (self.path / "history").is_dir():
            committed = self.committed_epoch()
            if committed is None and (self.path / ".history-committed-by-last").is_file():
                return []  # before the first LAST nothing is committed
            with _reading(self.id, self.path / "history"):
                rows = read_epochs(self.path, last_epoch=committed)
            return [NNIterationDataPoint.from_state(row["summary"]) for row in rows]
        last: dict[int, NNIterationDataPoint] = {}
        for idp in self.idps:
            last[idp.epoch] = idp
        return [last[e] for e in sorted(last)]

    def best_checkpoint(self) -> NNCheckpoint | None:
        from nnx._persistence.checkpoint import NNCheckpoint  # lazy: loads torch

        best = self.checkpoints_dir / "best.pt"
        if not best.is_file():
            return None
        with _reading(self.id, best):
            checkpoint = NNCheckpoint.from_file(best)
        return checkpoint

    def best_score(self) -> tuple[int, tuple[str, float] | None] | None:
        """BEST's epoch and what it scores (None: no finite score); None without a BEST.
        From the trusted summary when the run was loaded with one, else from BEST."""
        row = None if self._summary is None else self._summary.get("best")
        if isinstance(row, Mapping):
            what, value = row["what"], row["value"]
            return int(row["epoch"]), None if what is None else (str(what), float(value))
        best = self.best_checkpoint()
        if best is None:
            return None
        return best.epoch, score_label(best.idp, named_monitor=best.named_monitor,
                                       monitor_value=best.monitor_value)

    def __str__(self) -> str:
        return render_text(self)

    def _repr_html_(self) -> str:
        return render_html(self)

    def chart(self, path: str | os.PathLike[str]) -> Path:
        """Write the run chart (spec §6.4: the whole-epoch training loss, the validation
        loss, the monitor with its improving epochs marked, the LR) as one self-contained
        HTML file at ``path``; the path written. Drawn by nnx-viz, imported here on call
        (core never imports an add-on at import time): without it, the one install hint
        (:class:`~nnx.MissingDistributionError`), before anything is read or written."""
        charts = require_distribution("nnx-viz", "nnx.vis_utils", needed_by="NNRun.chart")
        written: Path = charts.write_run_chart(self, path)
        return written

    def __repr__(self) -> str:
        return f"NNRun(id={self.id!r}, epochs={len(self.epoch_records())})"
