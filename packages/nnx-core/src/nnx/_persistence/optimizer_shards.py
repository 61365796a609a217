"""A sharded fit's optimizer state as part of a resume point (FSDP, issue 42).

Under FSDP no process holds the whole optimizer state, and gathering it for every
commit would put all of it in rank 0's memory. So at a commit every rank writes its own
part with torch.distributed.checkpoint (DCP) into a staging directory beside the
checkpoints (``.optim-staging.<hex>``), and rank 0's commit makes that directory part
of the point it writes:

* the point's shard directory is ``<tag>.pt.opt.<generation>.dcp``, named like its
  sidecar (:func:`shards_name`): the staging directory renamed into place (LAST), or
  its files hard-linked from a point of the same state (BEST beside LAST, as the
  sidecar is), so a point owns its files and a later point's clean-up never takes them;
* the manifest lists every file of it with its SHA-256 and size (role
  :data:`ROLE`), so verification checks them as it checks the sidecar, and a point
  whose shards do not match is corrupted;
* the sidecar holds a marker (``{MARKER: key}``) where each optimizer's state was;
  :func:`resolve` gives readers the full state back in a single process's format, so
  a single process, DDP and an FSDP resume at any world size read the point alike.

The directory is placed before the staged manifest names it: a kill before the
manifest is published leaves a directory no manifest names, which the next save of the
tag removes with the sidecars it strands (:mod:`nnx._persistence.resume_point`).
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nnx._foundation.atomic import fsync_dir
from nnx._foundation.hashing import file_sha256
from nnx._foundation.safe_paths import check_inside
from nnx._persistence.point_manifest import SHARDS, ResumePoint, ResumePointError

__all__ = ["MARKER", "ROLE", "STAGING_PREFIX", "StagedShards", "check_shards", "digests",
           "names_shards", "numbered", "place_shards", "remove_tree", "resolve",
           "shards_name"]

ROLE = SHARDS
MARKER = "nnx.sharded_optimizer"
STAGING_PREFIX = ".optim-staging."


@dataclass(frozen=True)
class StagedShards:
    """What every rank wrote for one commit: the staging directory and its files'
    digests (name → sha256 and size)."""

    staging: Path
    files: Mapping[str, Mapping[str, Any]]


def shards_name(checkpoint_name: str, generation: int) -> str:
    return f"{checkpoint_name}.opt.{generation}.dcp"


def digests(directory: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """The SHA-256 and size of files a rank just wrote (DCP writes them itself, so they
    are hashed from disk, each by the rank that wrote it)."""
    return {name: {"sha256": file_sha256(directory / name),
                   "size": (directory / name).stat().st_size} for name in names}


def remove_tree(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)


def place_shards(directory: Path, name: str, shards: StagedShards | None,
                 like: str | None) -> None:
    """Make ``directory/name`` the point's shard directory: the files of ``like`` (a
    point's shard directory beside it) hard-linked (copied where links are unavailable),
    or ``shards``' staging directory renamed into place. A directory of that name left
    by a writer killed before its manifest was published goes first."""
    target = directory / name
    remove_tree(target)
    if like is not None:
        source = check_inside(directory, directory / like)
        target.mkdir()
        for entry in sorted(os.listdir(source)):
            try:
                os.link(source / entry, target / entry)
            except OSError:
                shutil.copy2(source / entry, target / entry)
    else:
        assert shards is not None
        os.replace(shards.staging, target)
    fsync_dir(target, strict=True)


def check_shards(checkpoint: Path, entry: Mapping[str, Any]) -> None:
    """Every file the manifest lists is in the point's shard directory with its bytes
    (ResumePointError: torn when missing, corrupted when different)."""
    directory = check_inside(checkpoint.parent, checkpoint.parent / str(entry["name"]))
    for name, digest in entry["files"].items():
        path = check_inside(directory, directory / name)
        if not path.is_file():
            raise ResumePointError("torn", f"optimizer shard {entry['name']}/{name} is missing")
        if path.stat().st_size != digest["size"] or file_sha256(path) != digest["sha256"]:
            raise ResumePointError("corrupted", f"optimizer shard {entry['name']}/{name} "
                                   "does not match its SHA-256")


def numbered(full: Mapping[str, Any]) -> dict[str, Any]:
    """A full optimizer state keyed by parameter names (as torch.distributed.checkpoint
    has it), renumbered as torch numbers a plain optimizer's: its groups' parameters in
    order."""
    index: dict[str, int] = {}
    groups = []
    for group in full["param_groups"]:
        ids = [index.setdefault(name, len(index)) for name in group["params"]]
        groups.append({**group, "params": ids})
    return {"state": {index[name]: value for name, value in full["state"].items()},
            "param_groups": groups}


def names_shards(value: Any) -> bool:
    """Whether a training state marks any optimizer's state as sharded."""
    if isinstance(value, Mapping):
        return MARKER in value or any(names_shards(v) for v in value.values())
    return False


def _replaced(value: Any, states: Mapping[str, Any]) -> Any:
    if isinstance(value, Mapping):
        if MARKER in value:
            return numbered(states[str(value[MARKER])])
        return {k: _replaced(v, states) for k, v in value.items()}
    return value


# What DCP's metadata file may name: its own records and the plain torch values in them.
# It is a pickle; read with this list only, a planted one is refused unexecuted (the
# project's rule for every file under a runs root, docs/durability.md).
_METADATA_GLOBALS = frozenset({
    ("pathlib", "PosixPath"), ("pathlib", "WindowsPath"), ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    *(("torch.distributed.checkpoint.metadata", n) for n in (
        "BytesStorageMetadata", "ChunkStorageMetadata", "Metadata", "MetadataIndex",
        "StorageMeta", "TensorProperties", "TensorStorageMetadata", "_MEM_FORMAT_ENCODING")),
})


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _METADATA_GLOBALS or (
                module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)):
            return super().find_class(module, name)
        raise ResumePointError("corrupted", f"optimizer shard metadata names {module}.{name}, "
                               "which DCP's metadata never holds; it is not unpickled")


def _read_whole(directory: Path) -> dict[str, Any]:
    """Every state DCP saved in ``directory``, whole, in one process: DCP's own reader and
    planner, except that its metadata is unpickled with :data:`_METADATA_GLOBALS` only and
    its non-tensor items (the parameter groups) through ``weights_only``, as its tensors
    already are."""
    from torch.distributed.checkpoint._traverse import set_element
    from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.filesystem import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    class Reader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
            with open(directory / ".metadata", "rb") as handle:
                metadata = _MetadataUnpickler(handle).load()
            metadata.storage_meta = StorageMeta(load_id=self.load_id)  # this read's own
            return metadata

    class Planner(_EmptyStateDictLoadPlanner):
        def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
            plain = torch.load(value, weights_only=True)
            if self.flatten_state_dict:
                set_element(self.original_state_dict,
                            self.mappings[read_item.dest_index.fqn], plain)
            else:
                self.state_dict[read_item.dest_index.fqn] = plain

    # The loader dcp_to_torch_save uses: the public load keeps only the keys it is given.
    whole: dict[str, Any] = {}
    planner = Planner()  # type: ignore[no-untyped-call]
    _load_state_dict(whole, storage_reader=Reader(directory), planner=planner, no_dist=True)
    return whole


def _last_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(exc).__name__


def resolve(state: dict[str, Any], checkpoint: Path, point: ResumePoint | None,
            generation: int | None) -> dict[str, Any]:
    """``state`` (a sidecar's training state) with every sharded optimizer's marker
    replaced by its full state, in a single process's format. The shards are checked
    against ``point`` (the manifest that vouched for the checkpoint) first; a
    checkpoint read without one finds them by its generation."""
    if not names_shards(state):
        return state
    entry = None if point is None else point.files.get(ROLE)
    if entry is not None:
        check_shards(checkpoint, entry)
        name = str(entry["name"])
    elif generation is not None:
        name = shards_name(checkpoint.name, generation)
    else:
        raise ResumePointError("torn", "the training state names sharded optimizer state, "
                               "but the checkpoint records no generation", path=checkpoint)
    directory = check_inside(checkpoint.parent, checkpoint.parent / name)
    if not directory.is_dir():
        raise ResumePointError("torn", f"optimizer shards {name} are missing", path=checkpoint)
    from torch.distributed.checkpoint.api import CheckpointException

    try:
        states = _read_whole(directory)
    # DCP wraps what its reader raised (a refused metadata pickle among it) in a
    # CheckpointException, a BaseException.
    except (Exception, CheckpointException) as exc:
        raise ResumePointError("corrupted", f"optimizer shards {name} cannot be read "
                               f"({_last_line(exc)})", path=checkpoint) from None
    resolved: dict[str, Any] = _replaced(state, states)
    return resolved
