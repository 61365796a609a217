"""NNCheckpoint: a model's weights at an epoch, with what is needed to read them back.

A checkpoint file ``checkpoints/<tag>.pt`` holds the net's state dict, the
run's configuration states, the epoch and its last record (which scores it).
Training state (optimizer, scheduler, scaler, RNG streams, components) goes
to the generation-addressed sidecar ``<tag>.pt.opt.<generation>.pt``, written
first; a manifest written last makes the three a resume point
(:mod:`nnx._persistence.resume_point`, checked by
:mod:`nnx._persistence.point_verify`).
"""

from __future__ import annotations

import functools
import io
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from nnx._foundation.records import NNIterationDataPoint, first_finite
from nnx._foundation.safe_paths import check_inside
from nnx._foundation.validation import check_run_id
from nnx._persistence.best_pointer import resolve_best
from nnx._persistence.checkpoint_format import (
    check_map_location,
    decode_checkpoint,
    is_safetensors,
)
from nnx._persistence.optimizer_shards import StagedShards, resolve
from nnx._persistence.point_manifest import ResumePoint, ResumePointError, manifest_path, read_point
from nnx._persistence.point_position import COMPLETED_EPOCH
from nnx._persistence.point_verify import check_held, read_verified, verify_point
from nnx._persistence.read_errors import CheckpointReadError, cause_line
from nnx._persistence.resume_point import write_point
from nnx.enums.checkpoints import Checkpoints
from nnx.models import MissingModelFactoryError

__all__ = ["CHECKPOINT_FORMAT", "CheckpointReadError", "NNCheckpoint", "checkpoint_files",
           "checkpoint_path", "sidecar_path"]

CHECKPOINT_FORMAT = "nnx.checkpoint/1"


def sidecar_path(checkpoint: str | os.PathLike[str]) -> Path:
    """Where a checkpoint's training state lives: ``<tag>.pt.opt.pt``."""
    return Path(f"{os.fspath(checkpoint)}.opt.pt")


def checkpoint_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The checkpoint files of a checkpoints directory (sidecars, manifests and locks
    excluded), sorted by name."""
    found = [*Path(directory).glob("*.pt"), *Path(directory).glob("*.safetensors")]
    return sorted(p for p in found if ".opt." not in p.name)


def _checkpoint_path(run: str, tag: str, root: str | os.PathLike[str]) -> Path:
    """``<tag>.pt``; a tag spelled with ``.safetensors`` names that file, and a bare tag with
    no ``.pt`` point (file or manifest) but a ``.safetensors`` one names the latter.

    The path rule (docs/durability.md): the run id and the tag are plain names (ValueError
    otherwise), and no component below ``root`` down to the file is a symbolic link
    (UnsafePathError naming it), checked before anything is read or a lock is created."""
    check_run_id("run", run)
    run = resolve_best(run, root)  # "best": the run runs/best names, read as a sibling
    check_run_id("type", tag, what="checkpoint tag")
    directory = Path(root) / run / "checkpoints"
    if is_safetensors(tag):
        return check_inside(root, directory / tag)
    pickle_path = check_inside(root, directory / f"{tag}.pt")
    portable = directory / f"{tag}.safetensors"
    if not _addressed(pickle_path) and _addressed(portable):
        return check_inside(root, portable)
    return pickle_path


def _addressed(path: Path) -> bool:
    # Only looks (lstat / stat); the path chosen is checked before it is read.
    return path.is_file() or manifest_path(path).is_file()


def _load_training_state(checkpoint: Path, side: Path, map_location: Any,
                         point: ResumePoint | None) -> dict[str, Any]:
    """A sidecar through ``torch.load(weights_only=True)``: a training state is tensors,
    numbers, strings and containers of those (spec §14.1), so anything else in it (a
    planted pickle, even one whose digest a rewritten manifest vouches for) is refused
    unexecuted. Its bytes are read once: with ``point`` (the manifest that vouched for
    the checkpoint) they are checked against its digest, then decoded as checked."""
    data = side.read_bytes()
    if point is not None:
        check_held(checkpoint, point, "sidecar", data)
    try:
        state = torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as exc:
        raise ResumePointError("corrupted", f"training state {side.name} cannot be read as "
                               f"plain data and is not unpickled ({cause_line(exc)})",
                               path=checkpoint) from None
    if not isinstance(state, dict):
        raise ResumePointError("corrupted", f"training state {side.name} holds a "
                               f"{type(state).__name__}, not a mapping", path=checkpoint)
    return state


def _tags_of(directory: Path) -> str:
    tags = sorted({path.name.removesuffix(".pt") for path in checkpoint_files(directory)})
    return f"it has {', '.join(tags)}" if tags else "it has no checkpoint yet"


def missing_checkpoint(path: Path) -> FileNotFoundError:
    """Why ``path`` names no checkpoint, in a run's terms where it is one of a run's:
    which run, under which root, which tag and what the run has instead."""
    shown = path.as_posix()
    if path.parent.name == "checkpoints":
        run_dir = path.parent.parent
        root, run = run_dir.parent.as_posix(), run_dir.name
        if not run_dir.is_dir():
            return FileNotFoundError(f"no run {run!r} under {root}/ (looked for {shown})")
        tag = path.name.removesuffix(".pt")
        return FileNotFoundError(f"run {run} under {root}/ has no {tag!r} checkpoint "
                                 f"({shown}); {_tags_of(path.parent)}")
    if len(path.parts) == 1 and (Path("runs") / path.name).is_dir():
        run = path.name  # a run id where a checkpoint file was expected
        return FileNotFoundError(
            f"{run!r} is a run id, not a checkpoint file; name one of its checkpoints, e.g. "
            f"runs/{run}/checkpoints/best.pt or NNCheckpoint.load({run!r}, 'best') "
            f"({_tags_of(Path('runs') / run / 'checkpoints')})")
    if len(path.parts) == 1 and re.fullmatch(r"[0-9a-f]{32}", path.name):
        return FileNotFoundError(f"no run {path.name!r} under runs/, and no checkpoint file "
                                 f"of that name")
    return FileNotFoundError(f"no checkpoint file {shown}")


def _tag(type: Checkpoints | str) -> str:
    return type.value if isinstance(type, Checkpoints) else type


def checkpoint_path(run: str, type: Checkpoints | str, *,
                    root: str | os.PathLike[str] = "runs") -> Path:
    """The file ``type`` names in run ``run``: ``<tag>.pt``, or the ``.safetensors``
    snapshot a ModelCheckpoint wrote under that tag (the loaders' and resume's one rule)."""
    return _checkpoint_path(run, _tag(type), root)


def _decoded(path: Path, map_location: Any, verify: bool) -> tuple[Any, ResumePoint | None]:
    """``path``'s payload and the point whose manifest vouched for its bytes (None when
    unverified). A point that does not verify raises ResumePointError; any other failure
    to read is :class:`CheckpointReadError` naming the file, with its cause on one line."""
    check_map_location(path, map_location)  # a caller's TypeError, before anything is read
    decode = functools.partial(decode_checkpoint, path, map_location)
    try:
        if verify:
            return read_verified(path, decode)
        return decode(None), None
    except (ResumePointError, FileNotFoundError, ImportError):
        raise  # they name the point, the missing file, the package to install
    except Exception as exc:
        raise CheckpointReadError(path, cause_line(exc)) from exc


@dataclass(eq=False)
class NNCheckpoint:
    """One saved model state. ``score`` is its control signal (lower is better)."""

    tag: str
    epoch: int
    run_id: str
    state_dict: Mapping[str, torch.Tensor]
    model: Mapping[str, Any]
    train: Mapping[str, Any]
    net: Mapping[str, Any] | None = None
    idp: NNIterationDataPoint | None = None
    named_monitor: bool = False
    monitor_value: float | None = None
    training_state_present: bool = False
    reconstructible: bool = True
    transforms: tuple[Any, ...] = ()
    generation: int | None = None
    checkpoint_id: str | None = None
    sidecar: str | None = None
    path: Path | None = field(default=None, compare=False)
    #: The resume point the last :meth:`save` wrote (None for one read from a file).
    point: ResumePoint | None = field(default=None, compare=False, repr=False)
    #: The resume point whose manifest vouched for the bytes :meth:`from_file` read; None
    #: when it read unverified (``verify=False``, or a checkpoint without a manifest).
    verified: ResumePoint | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # A runtime module (spec §3.2) is never reconstructible, whoever writes its checkpoint.
        net = self.model.get("net") if isinstance(self.model, Mapping) else None
        if isinstance(net, Mapping) and net.get("kind") == "runtime":
            self.reconstructible = False

    @property
    def score(self) -> float:
        """The first finite of val error → val loss → train error → train loss; +inf if none.

        A named-monitor run scores by its monitor's value instead.
        """
        if self.named_monitor:
            value = self.monitor_value
            return value if value is not None and math.isfinite(value) else math.inf
        found = None if self.idp is None else first_finite(self.idp)
        return math.inf if found is None else found[1]

    def payload(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "tag": self.tag,
            "epoch": self.epoch,
            "run_id": self.run_id,
            "model": dict(self.model),
            "net": None if self.net is None else dict(self.net),
            "train": dict(self.train),
            "idp": None if self.idp is None else self.idp.state(),
            "named_monitor": self.named_monitor,
            "monitor_value": self.monitor_value,
            "training_state_present": self.training_state_present,
            "reconstructible": self.reconstructible,
            "transforms": list(self.transforms),
            "state_dict": dict(self.state_dict),
        }

    def save(self, path: str | os.PathLike[str], training_state: Mapping[str, Any] | None = None,
             *, position: Mapping[str, Any] | None = None,
             like: NNCheckpoint | None = None, shards: StagedShards | None = None) -> Path:
        """Write a resume point: the sidecar (when given), the checkpoint, the manifest.

        ``like``: a checkpoint just saved beside this one with exactly this
        ``training_state``; the two points then share its sidecar's bytes
        (:func:`~nnx._persistence.resume_point.write_point`). ``shards``: a sharded
        fit's optimizer state (:mod:`nnx._persistence.optimizer_shards`).
        """
        dest = Path(path)
        if is_safetensors(dest) and not self.reconstructible:
            raise MissingModelFactoryError(
                f"{dest.name}: a safetensors checkpoint is a portable save, but this runtime "
                f"module has no factory to rebuild it (reconstructible=False); register a "
                f"model factory and use a ModelSpec, or save a pickle checkpoint")
        dest.parent.mkdir(parents=True, exist_ok=True)
        self.training_state_present = training_state is not None
        beside = like is not None and like.path is not None and like.path.parent == dest.parent
        point = write_point(dest, self.payload(), training_state,
                            position or {COMPLETED_EPOCH: self.epoch},
                            like=like.point if beside and like is not None else None,
                            shards=shards)
        self.generation, self.checkpoint_id = point.generation, point.checkpoint_id
        self.sidecar, self.path, self.point = point.sidecar, dest, point
        return dest

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], map_location: Any = "cpu", *,
                  verify: bool = True) -> NNCheckpoint:
        """Read a checkpoint; tensors land on ``map_location`` (CPU by default).

        Where the checkpoint has a manifest (spec §14.3), the bytes decoded are the
        ones it vouches for: they are read once, hashed and decoded as hashed; a
        point that does not verify raises ResumePointError naming the file.
        ``verify=False`` reads without that check (forensics on a damaged run). A
        checkpoint without a manifest (written before manifests, or copied out of
        its run) loads unverified. Any other failure to read it raises
        :class:`CheckpointReadError` (a ValueError) naming the file and the cause; a
        missing file raises FileNotFoundError naming the run, its root, the tag and
        the tags the run has.
        """
        path = Path(path)
        if not path.is_file():
            raise missing_checkpoint(path)
        payload, point = _decoded(path, map_location, verify)
        if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointReadError(path, f"it is not an NNx checkpoint ({CHECKPOINT_FORMAT})")
        try:
            idp = payload.get("idp")
            return cls(
                tag=payload["tag"], epoch=payload["epoch"], run_id=payload["run_id"],
                state_dict=payload["state_dict"], model=payload["model"], net=payload["net"],
                train=payload["train"],
                idp=None if idp is None else NNIterationDataPoint.from_state(idp),
                named_monitor=payload.get("named_monitor", False),
                monitor_value=payload.get("monitor_value"),
                training_state_present=payload.get("training_state_present", False),
                reconstructible=payload.get("reconstructible", True),
                transforms=tuple(payload.get("transforms", ())), path=path,
                generation=payload.get("generation"),
                checkpoint_id=payload.get("checkpoint_id"), sidecar=payload.get("sidecar"),
                verified=point,
            )
        except (KeyError, TypeError, ValueError) as exc:  # a payload missing or garbling a field
            raise CheckpointReadError(path, f"its payload is incomplete ({cause_line(exc)})"
                                      ) from exc

    @classmethod
    def load(cls, run: str, type: Checkpoints | str = Checkpoints.LAST, map_location: Any = "cpu",
             *, root: str | os.PathLike[str] = "runs", verify: bool = True) -> NNCheckpoint:
        """The checkpoint ``type`` (a Checkpoints member or a tag) of run ``run``, read as
        :meth:`from_file` reads it (``verify`` included)."""
        tag = _tag(type)
        path = _checkpoint_path(run, tag, root)
        if not path.is_file():
            raise missing_checkpoint(path)
        return cls.from_file(path, map_location=map_location, verify=verify)

    def training_state(self, map_location: Any = "cpu") -> dict[str, Any] | None:
        """The sidecar's training state, or None when the checkpoint carries none. A
        checkpoint read verified has its sidecar's bytes checked against the same
        manifest (ResumePointError naming the checkpoint when they differ), and so are
        the optimizer shards of an FSDP run, whose state it returns whole."""
        if self.path is None or not self.training_state_present:
            return None
        side = self.path.with_name(self.sidecar) if self.sidecar else sidecar_path(self.path)
        if not side.is_file():
            raise FileNotFoundError(f"checkpoint {self.path} names training state {side.name}, "
                                    "which is missing: the resume point is corrupt")
        state = _load_training_state(self.path, side, map_location, self.verified)
        if self.generation is not None and state.get("generation") != self.generation:
            raise ValueError(f"{side.name} is of generation {state.get('generation')}, the "
                             f"checkpoint of {self.generation}: the resume point is corrupt")
        # A sharded fit's optimizer state comes back whole, as a single process saves it.
        return resolve(state, self.path, self.verified, self.generation)

    # -- observational probes (never create runs/<id>/) ---------------------------------
    @classmethod
    def load_with_training_state(
        cls, run: str, type: Checkpoints | str = Checkpoints.LAST, map_location: Any = "cpu",
        *, root: str | os.PathLike[str] = "runs", verify: bool = True,
    ) -> tuple[NNCheckpoint | None, dict[str, Any] | None]:
        """(checkpoint, training state), or (None, None) when the run or tag does not exist.
        Both files are checked against the manifest unless ``verify=False``."""
        path = _checkpoint_path(run, _tag(type), root)
        if not path.is_file():
            return None, None
        checkpoint = cls.from_file(path, map_location=map_location, verify=verify)
        return checkpoint, checkpoint.training_state(map_location)

    @classmethod
    def load_training_state(cls, run: str, type: Checkpoints | str = Checkpoints.LAST,
                            map_location: Any = "cpu", *, root: str | os.PathLike[str] = "runs",
                            verify: bool = True) -> dict[str, Any] | None:
        return cls.load_with_training_state(run, type, map_location, root=root,
                                            verify=verify)[1]

    @classmethod
    def load_optimizer_state(cls, run: str, type: Checkpoints | str = Checkpoints.LAST,
                             map_location: Any = "cpu", *, root: str | os.PathLike[str] = "runs",
                             verify: bool = True) -> dict[str, Any] | None:
        state = cls.load_training_state(run, type, map_location, root=root, verify=verify)
        return None if state is None else state.get("optimizer")

    # -- resume points ------------------------------------------------------------------
    @classmethod
    def verify(cls, run: str, type: Checkpoints | str = Checkpoints.LAST, *,
               root: str | os.PathLike[str] = "runs") -> ResumePoint | None:
        """Check a resume point (ResumePointError if torn, mixed or corrupted); None for a
        checkpoint written before manifests (its payload records no generation). Nothing
        is unpickled. ``type`` may name a ``.safetensors`` snapshot (``"snap_e1"`` or
        ``"snap_e1.safetensors"``)."""
        return verify_point(_checkpoint_path(run, _tag(type), root), root=Path(root))

    @classmethod
    def resume_point(cls, run: str, type: Checkpoints | str = Checkpoints.LAST, *,
                     root: str | os.PathLike[str] = "runs") -> ResumePoint | None:
        """The live manifest of a checkpoint, or None before manifests existed (or while a
        first publish is staged); ResumePointError (torn) when a checkpoint that records a
        generation has lost its manifest."""
        return read_point(_checkpoint_path(run, _tag(type), root))
