"""What a run bundle holds (spec §22), as inspect_bundle and load_bundle return it.

Built from the manifest and the checked state.json alone: no tensor, no model factory.
The checks that come first are :mod:`nnx._persistence.bundle_read`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from nnx.enums.nets import Nets
from nnx.params.model import NNModelParams
from nnx.params.net import NNParams
from nnx.preprocessing import Standardizer

__all__ = ["BundleInfo", "ValidatedBundle", "build_info"]


@dataclass(frozen=True)
class BundleInfo:
    """What a bundle holds, read from its manifest and state.json alone (no tensor).

    ``model_params`` / ``net_params`` are built from ``model`` / ``net`` on first
    access, not by inspect_bundle or validate_bundle: resolving a net's name may
    consult the plugin registry and import an installed add-on (``"TRANSFORMER"``:
    nnx-lm), and inspection reads records only (spec §27)."""

    path: Path
    generation: str
    capability: str  # "resume" or "inference"
    source_run: str
    source_checkpoint: str
    epoch: int
    model: Mapping[str, Any]
    net: Mapping[str, Any] | None
    transforms: tuple[Mapping[str, Any], ...]
    components: tuple[str, ...]
    calibrators: tuple[Mapping[str, Any], ...]
    task: Mapping[str, Any] | None
    resume_refusal: str | None
    files: Mapping[str, Mapping[str, Any]] = field(repr=False)
    #: The source run's attempt id at export (None when it recorded no provenance).
    source_attempt: str | None = None
    #: The shipped preprocessing (file, columns, digest; inspection reads only the
    #: file's name), None when the bundle ships none.
    preprocessing: Mapping[str, Any] | None = None

    @cached_property
    def _params(self) -> tuple[Any, Any]:
        return _params(self.model, self.net)

    @property
    def model_params(self) -> Any:
        """The model's NNModelParams, or None where the recorded state does not read back."""
        return self._params[0]

    @property
    def net_params(self) -> Any:
        """A built-in net's NNParams (its dimensions), else None."""
        return self._params[1]

    @property
    def lineage_checkpoint(self) -> str:
        """The parent checkpoint a resumed run records: ``bundle-<gen[:16]>_e<epoch>``."""
        return f"bundle-{self.generation[:16]}_e{self.epoch}"


@dataclass(frozen=True)
class ValidatedBundle:
    """A bundle after every check: its info, decoded state and payload bytes as hashed."""

    info: BundleInfo
    state: Mapping[str, Any]  # tensor references as TensorRef
    payloads: Mapping[str, bytes]
    calibrators: tuple[Mapping[str, Any], ...]
    #: The fitted preprocessing, rebuilt from its checked state (None: none shipped).
    preprocessing: Standardizer | None = None
    #: Each tensor payload's checked safetensors header (``read_header``'s result), so
    #: decoding it does not parse the header a second time.
    headers: Mapping[str, Any] = field(default_factory=dict)


def build_info(root: Path, manifest: Mapping[str, Any], state: Mapping[str, Any],
               records: list[Any] | None, preprocessing: Standardizer | None = None
               ) -> BundleInfo:
    source = state["source"]
    training = state["training"]
    components = () if not isinstance(training, dict) else tuple(
        sorted((training.get("components") or {}).keys()))
    summaries = tuple(
        {"file": name, "format": None if records is None else records[i].get("format"),
         "labels": None if records is None else records[i].get("labels"),
         "model_id": None if records is None else records[i].get("model_id")}
        for i, name in enumerate(state["calibrators"]))
    return BundleInfo(
        path=root, generation=manifest["generation"], capability=state["capability"],
        source_run=source["run_id"], source_checkpoint=source["checkpoint"],
        epoch=source["epoch"], model=state["model"], net=state["net"],
        transforms=tuple(state["transforms"]), components=components, calibrators=summaries,
        task=state["task"], resume_refusal=state["resume_refusal"], files=manifest["files"],
        source_attempt=source["attempt_id"],
        preprocessing=None if "preprocessing" not in state else {
            "file": state["preprocessing"],
            "columns": None if preprocessing is None else preprocessing.columns,
            "digest": None if preprocessing is None else preprocessing.digest()})


def _params(model: Mapping[str, Any], net_state: Mapping[str, Any] | None
            ) -> tuple[Any, Any]:
    """The model's NNModelParams and, for a built-in net, its NNParams, built from data
    (no factory is called); None where the recorded state does not read back."""
    try:
        params = NNModelParams.from_state(model)
    except (KeyError, TypeError, ValueError):
        return None, None
    net = None
    if isinstance(params.net, Nets) and net_state is not None:
        try:
            net = NNParams.resolve_from_state(net_state, params.net)
        except (KeyError, TypeError, ValueError):
            net = None
    return params, net
