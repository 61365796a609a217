"""export_bundle: one of your runs' checkpoints, published as a run bundle (spec §22).

The checkpoint is read as any of your own checkpoints is (verified against its
manifest); everything refused is refused before the target directory is
touched: module extra state that is not a tensor, a custom object in the
optimizer or component state (no pickle fallback), a tensor the safetensors
payload cannot store (named by its state path), a runtime-only module, a
recorded topology transform no registered op replays (named by index and id),
a calibrator that does not calibrate this model (class count, labels, a
fingerprint of other weights, an id declared for another run or checkpoint), and a
preprocessing that is not a fitted Standardizer as wide as the net's input.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from nnx._contracts.calibrators import model_fingerprint
from nnx._engine.training_state import loop_kind
from nnx._foundation.bounded import load_json
from nnx._persistence import safetensors_codec as codec
from nnx._persistence.bundle_format import (
    MAX_JSON_BYTES,
    MODEL,
    PREPROCESSING,
    STATE,
    STATE_FORMAT,
    TRAINING,
    BundleExportError,
    encode_value,
)
from nnx._persistence.bundle_info import BundleInfo
from nnx._persistence.bundle_listing import read_manifest
from nnx._persistence.bundle_publish import check_target, publish_generation
from nnx._persistence.bundle_read import load_bundle
from nnx._persistence.bundle_records import (
    calibrator_problems,
    is_fingerprint,
    read_preprocessing,
)
from nnx._persistence.checkpoint import NNCheckpoint
from nnx._persistence.flattened_tensor import FLAT_SEPARATOR, flatten_subclass, is_subclass
from nnx.enums.checkpoints import Checkpoints
from nnx.enums.losses import Losses
from nnx.enums.nets import Nets
from nnx.models import MissingModelFactoryError
from nnx.params.model import NNModelParams
from nnx.provenance import read_provenance
from nnx.transforms.recipe import TransformRecipe
from nnx.transforms.registry import TransformCompatibilityError, resolve_transform

__all__ = ["export_bundle"]


def export_bundle(run_id: str, dir: str | os.PathLike[str], *,
                  checkpoint: Checkpoints | str = "last", calibrators: Sequence[Any] = (),
                  labels: Sequence[str | int] | None = None, preprocessing: Any = None,
                  root: str | os.PathLike[str] = "runs") -> BundleInfo:
    """Publish checkpoint ``checkpoint`` of run ``run_id`` (under ``root``) as a new
    generation of the bundle at ``dir``; returns the published bundle's BundleInfo.

    ``checkpoint``: ``"last"``, any Checkpoints tag, or a ModelCheckpoint stem
    (``"snap_e3"``). A checkpoint train() wrote gives a "resume" bundle, a
    weights-only snapshot an "inference" one. ``labels``: the categorical task's
    labels in class order (default the class indices), which every calibrator must
    carry. ``preprocessing``: the fitted Standardizer the model's inputs were prepared
    with; it ships as its state (preprocessing.json) and the reconstructed model's
    predict applies it to raw rows. Refusals raise before ``dir`` is touched.
    """
    tag = checkpoint.value if isinstance(checkpoint, Checkpoints) else checkpoint
    target = Path(dir)
    live = check_target(target, read_manifest)  # refused before the run is even read
    source = NNCheckpoint.load(run_id, tag, root=root)
    if not source.reconstructible:
        raise MissingModelFactoryError(
            f"checkpoint {tag!r} of run {run_id} holds a runtime module (reconstructible="
            "False): a bundle is a portable save, and no factory can rebuild that module; "
            "register a model factory and train a ModelSpec")
    training = source.training_state()
    resume_refusal = _check_transforms(source.transforms)
    if training is not None and loop_kind(training) == "trainer":
        resume_refusal = ("a Trainer run's bundle (named optimizers) resumes only through "
                          "Trainer.train, which bundles do not drive")
    task = _task(source, labels)
    prepared = None if preprocessing is None else _preprocessing(preprocessing, source.net)
    generation = secrets.token_hex(16)
    tensors: dict[str, dict[str, torch.Tensor]] = {MODEL: {}, TRAINING: {}}
    weights, flattened = _weights(source.state_dict, tensors[MODEL])
    encoded_training = None if training is None else encode_value(
        training, "training", _store(tensors[TRAINING], "training"))
    records = _calibrators(calibrators, task, source.state_dict, (source.run_id, tag))
    state = {
        "format": STATE_FORMAT, "version": 1, "generation": generation,
        "capability": "inference" if training is None else "resume",
        "source": {"run_id": source.run_id, "checkpoint": tag, "epoch": source.epoch,
                   "checkpoint_generation": source.generation,
                   "checkpoint_id": source.checkpoint_id,
                   "attempt_id": _attempt_id(Path(root) / source.run_id)},
        "model": encode_value(dict(source.model), "model", _no_tensor),
        "net": None if source.net is None else encode_value(dict(source.net), "net", _no_tensor),
        "train": encode_value(dict(source.train), "train", _no_tensor),
        "transforms": encode_value(list(source.transforms), "transforms", _no_tensor),
        "task": task, "weights": weights, "training": encoded_training,
        "record": None if source.idp is None else encode_value(source.idp.state(), "record",
                                                               _no_tensor),
        "calibrators": [f"calibrator-{i}.json" for i in range(len(records))],
        "resume_refusal": resume_refusal,
    }
    if prepared is not None:
        state["preprocessing"] = PREPROCESSING
    if flattened:  # absent otherwise: a bundle of plain weights reads as before
        state["flattened_weights"] = flattened
    files = {STATE: _json_bytes(state), MODEL: codec.encode(tensors[MODEL])}
    if training is not None:
        files[TRAINING] = codec.encode(tensors[TRAINING])
    for i, record in enumerate(records):
        files[f"calibrator-{i}.json"] = _json_bytes(record)
    if prepared is not None:
        files[PREPROCESSING] = _json_bytes(prepared)
    # The staged check is validate_bundle's, run on the bytes just written (hashed as
    # they were written); the bundle it vouches for is the one published, so its info
    # is the answer, and nothing is read back.
    staged = publish_generation(
        target, generation, files, live,
        lambda root, manifest: load_bundle(root, manifest=manifest, written=files))
    info: BundleInfo = staged.info
    return info


def _json_bytes(value: Any) -> bytes:
    """The format's JSON: strict (no NaN), UTF-8, keys in a stable order."""
    return json.dumps(value, allow_nan=False, sort_keys=True, ensure_ascii=False,
                      indent=1).encode("utf-8")


def _storable(path: str, tensor: torch.Tensor) -> None:
    """Refuse, naming its state path, a tensor the safetensors payload cannot hold
    (complex, uint16-64, float8, sparse ...), before anything is written."""
    problem = codec.unstorable(tensor)
    if problem is not None:
        raise BundleExportError(f"{path}: the tensor {problem}; nothing was written")


def _store(into: dict[str, torch.Tensor], payload: str) -> Any:
    def store(path: str, tensor: torch.Tensor) -> str:
        _storable(path, tensor)
        name = f"t{len(into):06d}"
        into[name] = tensor
        return f"{payload}:{name}"
    return store


def _no_tensor(path: str, tensor: torch.Tensor) -> str:
    raise BundleExportError(f"{path}: a tensor in the run's configuration; only weights and "
                            "training state hold tensors")


def _weights(state_dict: Mapping[str, Any], into: dict[str, torch.Tensor]
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """state.json's ``weights`` (plain tensors) and ``flattened_weights`` (tensor
    subclasses, a QAT-converted net's: their inner tensors, type name and metadata; see
    nnx._persistence.flattened_tensor), the tensors added to ``into``."""
    odd = [key for key, value in state_dict.items() if not isinstance(value, torch.Tensor)]
    if odd:
        raise BundleExportError(
            f"the net's state holds non-tensor entries {odd[:5]} (module extra state); a "
            "bundle stores tensors only and never pickles")
    plain, flattened = {}, {}
    for key, value in state_dict.items():
        if not is_subclass(value):
            _put(into, f"weights.{key}", key, value)
            plain[key] = {"$tensor": f"model:{key}"}
            continue
        try:
            flat = flatten_subclass(value, f"weights.{key}")
        except ValueError as exc:
            raise BundleExportError(f"{exc}; nothing was written") from None
        inner = {}
        for name, tensor in flat.inner.items():
            _put(into, f"weights.{key}.{name}", f"{key}{FLAT_SEPARATOR}{name}", tensor)
            inner[name] = {"$tensor": f"model:{key}{FLAT_SEPARATOR}{name}"}
        flattened[key] = {"type": flat.kind, "meta": flat.meta, "size": list(flat.size),
                          "inner": inner}
    return plain, flattened


def _put(into: dict[str, torch.Tensor], path: str, name: str, tensor: torch.Tensor) -> None:
    _storable(path, tensor)
    if name in into:  # a state key spelled like another's inner tensor
        raise BundleExportError(f"{path}: its payload name {name!r} is taken twice; nothing "
                                "was written")
    into[name] = tensor


def _check_transforms(states: Sequence[Any]) -> str | None:
    """Refuse a transform no registered op replays; the resume refusal of a topology
    converted at train end (its op declares ``converts_at_train_end``), else None."""
    refusal = None
    for i, state in enumerate(states):
        ident = state.get("op") if isinstance(state, Mapping) else type(state).__name__
        try:
            recipe = TransformRecipe.from_state(state)
            op = resolve_transform(recipe)
        except (TransformCompatibilityError, ValueError, TypeError) as exc:
            raise BundleExportError(
                f"transforms[{i}] ({ident}) is a topology transform NNx cannot replay from "
                f"data ({exc}); only registered transform recipes are bundled") from None
        if getattr(op, "converts_at_train_end", False):
            refusal = (f"transforms[{i}] ({recipe.label}) converted the topology at train end "
                       "(a QAT checkpoint); its bundle rebuilds for inference only")
    return refusal


def _task(source: NNCheckpoint, labels: Sequence[str | int] | None) -> dict[str, Any] | None:
    """The categorical task a calibrator must calibrate: its class count and labels;
    None for a model that is not categorical (or whose class count is not recorded)."""
    params = NNModelParams.from_state(source.model)
    count = None
    if params.task is not None:
        if params.task.kind == "categorical":
            count = params.task.num_outputs
    elif params.loss in (Losses.CROSS_ENTROPY, Losses.NEGATIVE_LOG_LIKELIHOOD) and isinstance(
            params.net, Nets) and source.net is not None:
        count = source.net.get("output_dim")
    if not isinstance(count, int) or count < 2:
        if labels is not None:
            raise BundleExportError("labels= names a categorical task's classes, and this "
                                    "model declares none")
        return None
    names = list(range(count)) if labels is None else list(labels)
    if len(names) != count or len({repr(n) for n in names}) != count or not all(
            isinstance(n, (str, int)) and not isinstance(n, bool) for n in names):
        raise BundleExportError(f"labels= must name each of the {count} classes once; got "
                                f"{list(labels or ())}")
    return {"kind": "categorical", "num_classes": count, "labels": names}


def _calibrators(calibrators: Sequence[Any], task: Mapping[str, Any] | None,
                 weights: Mapping[str, torch.Tensor], source: tuple[str, str]
                 ) -> list[dict[str, Any]]:
    records, problems = [], []
    fingerprint = None
    for i, calibrator in enumerate(calibrators):
        what = f"calibrators[{i}]"
        to_json = getattr(calibrator, "to_json", None)
        if not callable(to_json):
            raise BundleExportError(f"{what} ({type(calibrator).__name__}) has no to_json(); "
                                    "see nnx.extend.BundleCalibrator")
        record = to_json()
        if isinstance(record, (str, bytes)):  # JSON text, as nnx.calibration's to_json gives
            try:
                record = load_json(data=record, where=what, max_bytes=MAX_JSON_BYTES,
                                   strict=True)
            except ValueError as exc:
                raise BundleExportError(f"{what}.to_json() is not a strict JSON record: "
                                        f"{exc}") from None
        record = dict(record) if isinstance(record, Mapping) else record
        found = calibrator_problems(record, task, what, source)
        if not found and getattr(calibrator, "num_classes", len(record["labels"])) != len(
                record["labels"]):
            found.append(f"{what} reports {calibrator.num_classes} classes, its record "
                         f"{len(record['labels'])}")
        if not found and is_fingerprint(record.get("model_id")):
            fingerprint = fingerprint or model_fingerprint(weights)
            if record["model_id"] != fingerprint:
                found.append(f"{what} is bound to model {record['model_id']}, this "
                             f"checkpoint's weights are {fingerprint}")
        problems += found
        records.append(record)
    if problems:
        raise BundleExportError("; ".join(problems))
    return records


def _preprocessing(preprocessing: Any, net: Mapping[str, Any] | None) -> dict[str, Any]:
    """The state of a fitted preprocessing that rebuilds from data (a Standardizer),
    checked as every validation checks it; BundleExportError for anything else."""
    state = getattr(preprocessing, "state", None)
    if not callable(state) or isinstance(preprocessing, type):
        raise BundleExportError(
            f"preprocessing= takes a fitted Standardizer; a {type(preprocessing).__name__} "
            "is a runtime transform (reconstructible: false, docs/preprocessing.md), which a "
            "bundle cannot carry without pickling it")
    try:
        return read_preprocessing(state(), net, "preprocessing=").state()
    except (ValueError, TypeError) as exc:
        raise BundleExportError(f"{exc}; nothing was written") from None


def _attempt_id(run_dir: Path) -> str | None:
    """The source run's last attempt id, when it recorded provenance (a lineage detail)."""
    provenance = read_provenance(run_dir) if run_dir.is_dir() else None
    attempt = None if provenance is None else provenance.attempt
    return None if attempt is None else str(attempt.attempt_id)
