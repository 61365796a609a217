"""reconstruct_bundle and ReconstructedBundle.resume (spec §22).

Reconstruction validates the bundle first (every check of validate_bundle, on
the bytes it then decodes: each payload read and hashed once, each safetensors
header parsed once), gathers everything this process lacks (a model
factory, a transform op, a component, the device the model was saved on) into
one BundleReconstructionError before any model is allocated, then rebuilds the
model as NNModel.from_checkpoint does from an in-memory checkpoint: recipes
replayed, names and shapes checked, weights loaded strictly.

resume() trains the rebuilt model as a stateful resume of the bundle's run. The
bundle's training state is handed to the engine in memory
(:func:`nnx._engine.resume.resume_from_memory`), so it never becomes a pickle
and nothing is read from a runs root; the resumed run's lineage names the
bundle: parent checkpoint ``bundle-<generation[:16]>_e<epoch>``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from nnx._contracts.calibrators import read_calibrator
from nnx._contracts.components import check_components, discover_components
from nnx._engine.resume import MemoryResumeSource, resume_from_memory
from nnx._engine.training_state import saved_components
from nnx._persistence import safetensors_codec as codec
from nnx._persistence.bundle_format import (
    MODEL,
    TRAINING,
    BundleCapabilityError,
    BundleReconstructionError,
    BundleValidationError,
    resolve_refs,
)
from nnx._persistence.bundle_info import BundleInfo, ValidatedBundle
from nnx._persistence.bundle_read import load_bundle
from nnx._persistence.checkpoint import NNCheckpoint
from nnx._persistence.flattened_tensor import (
    FLAT_SEPARATOR,
    FlattenedTensor,
    FlattenedTensorError,
)
from nnx._surface.model import NNModel
from nnx._surface.preprocessed_model import PreprocessedNNModel
from nnx.enums.devices import Devices
from nnx.models import ModelSpec, resolve_model_factory
from nnx.models.registry import (
    MissingModelFactoryError,
    ModelFactory,
    overriding_model_factories,
)
from nnx.params.model import NNModelParams
from nnx.preprocessing import Standardizer
from nnx.transforms.recipe import TransformRecipe
from nnx.transforms.registry import TransformCompatibilityError, resolve_transform

__all__ = ["ReconstructedBundle", "reconstruct_bundle"]

@dataclass(eq=False)
class ReconstructedBundle:
    """A bundle rebuilt: ``model`` (serve it and drop the rest), ``info``, the
    ``calibrators`` (objects where a reader is registered, else their records), the
    ``preprocessing`` (a Standardizer the model's predict applies to raw rows), and
    for a "resume" bundle its training state, held for :meth:`resume`."""

    model: NNModel
    info: BundleInfo
    calibrators: tuple[Any, ...]
    excluded: tuple[str, ...] = ()
    #: The fitted Standardizer the bundle ships (the model's predict applies it), or None.
    preprocessing: Standardizer | None = None
    training_state: dict[str, Any] | None = field(default=None, repr=False)
    _checkpoint: NNCheckpoint | None = field(default=None, repr=False)

    def resume(self, params: Any, **train_kwargs: Any) -> Any:
        """``model.train(params, **train_kwargs)`` as a stateful resume of the bundle's run:
        optimizer, scheduler, GradScaler, RNG and component state from the bundle. Refused
        with BundleCapabilityError, before anything changes, for an inference bundle, a
        Trainer run's, a topology converted at train end, or a model rebuilt with
        exclude_submodules."""
        info = self.info
        if self.excluded:
            raise BundleCapabilityError(
                f"the model was rebuilt without {list(self.excluded)} (exclude_submodules): it "
                "serves inference and cannot resume its run")
        if info.capability != "resume" or self.training_state is None:
            raise BundleCapabilityError(
                f"bundle {info.path.as_posix()} is an inference bundle (checkpoint "
                f"{info.source_checkpoint!r} holds weights only): it rebuilds, it cannot resume")
        if info.resume_refusal is not None:
            raise BundleCapabilityError(f"this bundle cannot resume: {info.resume_refusal}")
        for name in ("resume_from_run_id", "resume_from_checkpoint"):
            if getattr(params, name, None) is not None:
                raise ValueError(f"{name} is set by the bundle; pass params without it")
        if getattr(params, "resume_mode", "auto") not in ("auto", "stateful"):
            raise ValueError("a bundle resumes statefully; resume_mode must be 'auto' or "
                             "'stateful'")
        assert self._checkpoint is not None
        tag = info.lineage_checkpoint
        resumed = dataclasses.replace(params, resume_from_run_id=info.source_run,
                                      resume_from_checkpoint=tag, resume_mode="stateful")
        parent = {"run_id": info.source_run,
                  "attempt_id": info.source_attempt,
                  "checkpoint": tag, "epoch": info.epoch,
                  "generation": self._checkpoint.generation,
                  "bundle_generation": info.generation}
        source = MemoryResumeSource(info.source_run, tag, self._checkpoint,
                                    self.training_state, parent)
        with resume_from_memory(source):
            return self.model.train(resumed, **train_kwargs)


def _problems(bundle: ValidatedBundle, params: NNModelParams | None,
              factories: Mapping[tuple[str, int], ModelFactory] | None,
              components: Sequence[Any], device: Devices | None) -> list[str]:
    """Everything this process lacks to rebuild (and, for components, resume) the bundle."""
    problems: list[str] = []
    state = bundle.state
    if params is None:
        return [f"the bundle's model configuration does not read back: {state['model']}"]
    if isinstance(params.net, ModelSpec):
        key = (params.net.id, params.net.version)
        if factories is not None:
            if key not in factories:
                problems.append(f"model factory {params.net.label}: not among factories= "
                                f"{sorted(factories)}")
        else:
            try:
                resolve_model_factory(params.net)
            except MissingModelFactoryError as exc:
                problems.append(f"model factory {params.net.label}: {exc}")
    for i, recipe_state in enumerate(state["transforms"]):
        try:
            resolve_transform(TransformRecipe.from_state(recipe_state))
        except (TransformCompatibilityError, ValueError) as exc:
            problems.append(f"transforms[{i}] ({recipe_state.get('op')}): {exc}")
    target = device or params.device
    if target is Devices.CUDA and not torch.cuda.is_available():
        problems.append("the model was saved on CUDA and this host has none; pass "
                        "device=Devices.CPU")
    mps = getattr(torch.backends, "mps", None)
    if target is Devices.MPS and (mps is None or not mps.is_available()):
        problems.append("the model was saved on MPS and this host has none; pass "
                        "device=Devices.CPU")
    training = state["training"]
    saved = None if not isinstance(training, Mapping) else saved_components(training)
    if components and saved is not None:
        try:
            given = discover_components([], components)
        except TypeError as exc:
            return [*problems, str(exc)]
        own = {name: entry for name, entry in saved.items() if not name.startswith("nnx.")}
        problems += check_components(given, own)
    elif saved:
        problems += [f"component {name!r}: the bundle holds its required state; pass it in "
                     "components=" for name, entry in sorted(saved.items())
                     if not name.startswith("nnx.") and entry.get("required", True)]
    return problems


def reconstruct_bundle(path: str | os.PathLike[str], *,
                       factories: Mapping[tuple[str, int], ModelFactory] | None = None,
                       components: Sequence[Any] = (), batch_adapter: Any = None,
                       device: Devices | None = None, exclude_submodules: Sequence[str] = (),
                       task: Any = None) -> ReconstructedBundle:
    """Validate the bundle at ``path``, then rebuild its model (see the module docstring).

    ``factories``: ``{(id, version): factory}`` for a registered model (the process
    registry when omitted). ``components``: the resumed run's components, whose saved
    state is checked now. ``batch_adapter`` / ``task``: runtime-only, as for NNModel.
    ``device``: where to rebuild (``Devices.CPU`` for a model saved on CUDA or MPS on a
    host without it). ``exclude_submodules``: top-level submodules the run attached to
    the net, left out (every other weight still strict); such a model cannot resume.
    """
    bundle = load_bundle(path)
    state = bundle.state
    if device is not None and not isinstance(device, Devices):
        raise TypeError(f"device must be a Devices member; got {device!r}")
    params = bundle.info.model_params
    problems = _problems(bundle, params, factories, components, device)
    if problems:
        raise BundleReconstructionError(
            f"bundle {bundle.info.path.as_posix()} cannot be rebuilt here; nothing was "
            "allocated:\n  - " + "\n  - ".join(problems))
    assert params is not None
    weights: dict[str, Any] = codec.decode(bundle.payloads[MODEL], MODEL,
                                           header=bundle.headers.get(MODEL))
    _fold_flattened(weights, state.get("flattened_weights", {}))
    excluded = _exclude(weights, exclude_submodules)
    model_state = dict(state["model"])
    if device is not None:
        model_state = dataclasses.replace(params, device=device).state()
    checkpoint = NNCheckpoint(
        tag=bundle.info.lineage_checkpoint, epoch=bundle.info.epoch,
        run_id=bundle.info.source_run, state_dict=weights, model=model_state,
        train=state["train"], net=state["net"], transforms=tuple(state["transforms"]),
        training_state_present=state["training"] is not None,
        generation=state["source"]["checkpoint_generation"],
        checkpoint_id=state["source"]["checkpoint_id"])
    # With preprocessing, the model's predict takes raw rows and standardizes them once.
    cls = NNModel if bundle.preprocessing is None else PreprocessedNNModel
    with overriding_model_factories(factories or {}):  # never the process registry
        try:
            model = cls.from_checkpoint(checkpoint, batch_adapter=batch_adapter, task=task)
        except FlattenedTensorError as exc:
            raise BundleValidationError(str(exc)) from None
    if isinstance(model, PreprocessedNNModel):
        model.preprocessing = bundle.preprocessing
    training = None
    if state["training"] is not None and not excluded:
        tensors = codec.decode(bundle.payloads[TRAINING], TRAINING,
                               header=bundle.headers.get(TRAINING))
        training = resolve_refs(state["training"], tensors)
    calibrators = tuple(read_calibrator(record) for record in bundle.calibrators)
    return ReconstructedBundle(model=model, info=bundle.info, calibrators=calibrators,
                               excluded=excluded, preprocessing=bundle.preprocessing,
                               training_state=training, _checkpoint=checkpoint)


def _fold_flattened(weights: dict[str, Any], entries: Mapping[str, Any]) -> None:
    """Gather each tensor subclass's stored inner tensors under its state key, as the
    FlattenedTensor that from_checkpoint rebuilds on the replayed net's template."""
    for key, entry in entries.items():
        inner = {name: weights.pop(f"{key}{FLAT_SEPARATOR}{name}") for name in entry["inner"]}
        weights[key] = FlattenedTensor(entry["type"], entry["meta"], tuple(entry["size"]),
                                       inner)


def _exclude(weights: dict[str, Any], names: Sequence[str]) -> tuple[str, ...]:
    """Drop the weights of the top-level submodules ``names`` (each must hold some)."""
    if isinstance(names, str):
        raise TypeError("exclude_submodules takes a sequence of names, not a string")
    for name in names:
        if not isinstance(name, str) or not name or "." in name:
            raise ValueError(f"exclude_submodules names top-level submodules; got {name!r}")
        held = [key for key in weights if key.startswith(name + ".")]
        if not held:
            raise ValueError(f"exclude_submodules: the bundle holds no weights under {name!r}")
        for key in held:
            del weights[key]
    return tuple(names)
