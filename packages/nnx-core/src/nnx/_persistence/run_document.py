"""The run document as add-ons read it (spec §4, §4.3, §4.5): run.yaml and metadata.yaml
through named functions, never through key strings (issue 37).

run.yaml is the configuration the run id hashes (``model``, ``net``, ``train`` or a
Trainer run's ``trainer``, ``task``, ``salt``, ``transforms``); metadata.yaml is the
environment and the ``resume`` record (never hashed). A tool over runs (nnx.comparison)
reads both through :func:`read_run_document` and the :class:`RunDocument` it returns: the
loop block, the seeds, the parent link, the declared monitor, the resume record and
:meth:`RunDocument.identity_config` (the configuration without its runtime fields). Key
spellings live here, so a renamed key changes one module and every reader with it.

Torch-free: the foundation only (the bounded YAML reader and the path rule).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnx._foundation.bounded import load_yaml
from nnx._foundation.safe_paths import inside

__all__ = ["METADATA_FILE", "RUN_DOCUMENT_KEYS", "RUN_FILE", "RunDocument", "read_run_document",
           "read_yaml", "run_document_exists"]

RUN_FILE = "run.yaml"
METADATA_FILE = "metadata.yaml"

# run.yaml: the top-level blocks, and the fields of them a reader of runs interprets.
_MODEL, _NET, _TRAIN, _TRAINER, _SALT = "model", "net", "train", "trainer", "salt"
_SEED, _DEVICE, _MONITOR = "seed", "device", "monitor"
_PARENT_RUN_ID, _PARENT_CHECKPOINT = "parent_run_id", "parent_checkpoint"
_NET_KIND, _REGISTERED = "kind", "registered"  # a registered ModelSpec's net block
# metadata.yaml: the resume record (nnx._persistence.resume_status writes it).
_RESUME, _RESUME_MODE, _SOURCE_CHECKPOINT_ID = "resume", "mode", "source_checkpoint_id"

#: The run-document keys whose names are the run document's own: an add-on that spells
#: one to read a mapping reads the run document around this module (the workspace test
#: tests-integration/test_run_document_keys.py refuses that). Generic words the document
#: shares with add-ons' own documents (``model``, ``train``, ``seed``, ``kind``, ``mode``)
#: are read through the same functions but cannot be told apart by spelling.
RUN_DOCUMENT_KEYS = frozenset({
    _SALT, _TRAINER, _DEVICE, _MONITOR, _PARENT_RUN_ID, _PARENT_CHECKPOINT, "resume_from_run_id",
    _RESUME, _SOURCE_CHECKPOINT_ID, "source_run", "source_checkpoint", "source_epoch",
    "source_generation", "restored_components", "fresh_components", "transforms",
})


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _registered(model: Any) -> Mapping[str, Any] | None:
    """A registered ModelSpec's net block (the model's ``net``), else None."""
    net = model.get(_NET) if isinstance(model, Mapping) else None
    return net if isinstance(net, Mapping) and net.get(_NET_KIND) == _REGISTERED else None


@dataclass
class RunDocument:
    """What one run directory's run.yaml (``config``) and metadata.yaml say of it; the
    metadata is read on first use (a reader of many runs opens it only where needed)."""

    run_id: str
    path: Path
    config: Mapping[str, Any]  # run.yaml
    _metadata: Mapping[str, Any] | None = field(default=None, repr=False)

    @property
    def loop(self) -> Mapping[str, Any]:
        """The train block, or a Trainer run's trainer block ({} when neither)."""
        block = self.config.get(_TRAIN, self.config.get(_TRAINER))
        return block if isinstance(block, Mapping) else {}

    @property
    def seed(self) -> int | None:
        """The training (or Trainer) seed; None when not recorded."""
        return _int(self.loop.get(_SEED))

    @property
    def init_seed(self) -> int | None:
        """A registered ModelSpec's initialization seed (None for other nets)."""
        spec = _registered(self.config.get(_MODEL))
        return None if spec is None else _int(spec.get(_SEED, 0))

    @property
    def parent_run_id(self) -> str | None:
        """The run this one continues or fine-tunes (None for a fresh run)."""
        return _text(self.loop.get(_PARENT_RUN_ID))

    @property
    def parent_checkpoint(self) -> Any:
        """The parent's checkpoint tag, as recorded (None when not recorded)."""
        return self.loop.get(_PARENT_CHECKPOINT)

    @property
    def monitor(self) -> Any:
        """The declared monitor's state (None without one); ``MonitorSpec.from_state``
        reads it."""
        return self.loop.get(_MONITOR)

    def identity_config(self) -> dict[str, Any]:
        """run.yaml without its runtime fields: the salt, the seeds (loop and registered
        ModelSpec), the device and the parent's id (a lineage names the parent instead).
        Two replicates of one configuration give equal documents."""
        doc = copy.deepcopy(dict(self.config))
        doc.pop(_SALT, None)
        for block in (_TRAIN, _TRAINER):
            if isinstance(doc.get(block), dict):
                doc[block].pop(_SEED, None)
                doc[block].pop(_PARENT_RUN_ID, None)
        model = doc.get(_MODEL)
        if isinstance(model, dict):
            model.pop(_DEVICE, None)
            spec = _registered(model)
            if isinstance(spec, dict):
                spec.pop(_SEED, None)
        return doc

    def metadata(self) -> Mapping[str, Any]:
        """metadata.yaml ({} when missing or unreadable: an unrecorded fact)."""
        if self._metadata is None:
            self._metadata = read_yaml(self.path / METADATA_FILE)
        return self._metadata

    @property
    def resume(self) -> Mapping[str, Any] | None:
        """metadata.yaml's resume record; None when the run recorded none."""
        record = self.metadata().get(_RESUME)
        return record if isinstance(record, Mapping) else None

    @property
    def resume_mode(self) -> Any:
        """The resume record's mode (``fresh``, ``stateful``, ``weights_only``); None
        without a record."""
        record = self.resume
        return None if record is None else record.get(_RESUME_MODE)

    @property
    def source_checkpoint_id(self) -> str | None:
        """The id of the checkpoint this run resumed from (None when not recorded)."""
        record = self.resume
        return None if record is None else _text(record.get(_SOURCE_CHECKPOINT_ID))


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping, or {} when the file is missing, unreadable (too large or nested
    too deeply included: the bounded reader) or not a mapping."""
    try:
        doc = load_yaml(path)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def run_document_exists(root: str | os.PathLike[str], run_id: str) -> bool:
    """Whether ``root/run_id`` holds a run.yaml."""
    return (Path(root) / run_id / RUN_FILE).is_file()


def read_run_document(root: str | os.PathLike[str], run_id: str) -> RunDocument:
    """The run's document; ValueError / OSError when its run.yaml cannot be read or is not
    an NNx run configuration. No symbolic link below ``root`` is followed (the path rule,
    UnsafePathError)."""
    path = inside(root, run_id, what="run")
    config = load_yaml(inside(path, RUN_FILE, what="run file"))
    if not isinstance(config, Mapping) or not isinstance(config.get(_MODEL), Mapping):
        raise ValueError(f"{path / RUN_FILE} is not an NNx run configuration")
    return RunDocument(run_id, path, config)
