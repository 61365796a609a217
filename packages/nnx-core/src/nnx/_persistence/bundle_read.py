"""Reading a run bundle (spec §22): inspect_bundle, validate_bundle.

Every check runs on bytes, before any tensor is built: the manifest and the
directory listing agree (nothing missing, unlisted or symlinked, one generation
throughout), each payload's size (checked on the open file before it is read)
and SHA-256, strict JSON (duplicate keys and runaway nesting refused before
parsing), the state's schema, calibrator labels and class counts against the
task, each safetensors header against the tensors state.json references, and
last a calibrator's fingerprint model_id against the weights hashed straight
from the payload. Nothing here unpickles, calls a model factory or downloads,
whatever else lies beside the bundle.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from nnx._foundation.bounded import load_json
from nnx._foundation.hashing import sha256_hex
from nnx._persistence import safetensors_codec as codec
from nnx._persistence.bundle_format import (
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    CALIBRATOR,
    GENERATION,
    MANIFEST,
    MANIFEST_TEMP,
    MAX_JSON_BYTES,
    MAX_MANIFEST_BYTES,
    MODEL,
    PAYLOAD_NAMES,
    PREPROCESSING,
    STATE,
    STATE_FORMAT,
    TRAINING,
    BundleValidationError,
    TensorRef,
    decode_value,
    generation_dir,
    is_generation_name,
    read_regular,
)
from nnx._persistence.bundle_records import (
    calibrator_problems,
    is_fingerprint,
    read_preprocessing,
)
from nnx.enums.nets import Nets
from nnx.params.model import NNModelParams
from nnx.params.net import NNParams
from nnx.preprocessing import Standardizer

__all__ = ["BundleInfo", "ValidatedBundle", "inspect_bundle", "load_bundle", "read_manifest",
           "validate_bundle"]

#: A tensor payload larger than this is refused before it is read.
MAX_TENSOR_BYTES = 1 << 40
_STATE_KEYS = {"format", "version", "generation", "capability", "source", "model", "net",
               "train", "transforms", "task", "weights", "training", "record", "calibrators",
               "resume_refusal"}
#: Present only when used (a bundle without preprocessing reads as before it existed).
_OPTIONAL_KEYS = {"preprocessing"}
_SOURCE_KEYS = {"run_id", "checkpoint", "epoch", "checkpoint_generation", "checkpoint_id",
                "attempt_id"}


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


def read_manifest(root: Path) -> dict[str, Any]:
    """bundle.json, read and schema-checked (BundleValidationError)."""
    data = read_regular(root / MANIFEST, None, MAX_MANIFEST_BYTES, MANIFEST)
    try:
        manifest = load_json(data=data, where=MANIFEST, max_bytes=MAX_MANIFEST_BYTES,
                             max_depth=8, strict=True)
    except ValueError as exc:
        raise BundleValidationError(str(exc)) from None
    if (not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT
            or set(manifest) != {"format", "version", "generation", "files"}):
        raise BundleValidationError(f"{root / MANIFEST} is not an NNx run bundle manifest "
                                    f"({BUNDLE_FORMAT})")
    if manifest["version"] != BUNDLE_VERSION:
        raise BundleValidationError(f"{MANIFEST}: format version {manifest['version']!r}; "
                                    f"this NNx reads version {BUNDLE_VERSION}")
    generation, files = manifest["generation"], manifest["files"]
    if not isinstance(generation, str) or not GENERATION.fullmatch(generation):
        raise BundleValidationError(f"{MANIFEST}: generation {generation!r} is not 32 hex digits")
    if not isinstance(files, dict):
        raise BundleValidationError(f"{MANIFEST}: files is not a mapping")
    prefix = generation_dir(generation) + "/"
    for rel, entry in files.items():
        name = rel[len(prefix):] if rel.startswith(prefix) else None
        if name is None:
            raise BundleValidationError(f"{MANIFEST} lists {rel!r}, outside generation "
                                        f"{generation} (one generation id throughout)")
        if name not in PAYLOAD_NAMES and not CALIBRATOR.fullmatch(name):
            raise BundleValidationError(f"{MANIFEST} lists {rel!r}, not a payload of the format")
        if (not isinstance(entry, dict) or set(entry) != {"sha256", "size"}
                or not isinstance(entry["sha256"], str) or len(entry["sha256"]) != 64
                or not isinstance(entry["size"], int) or isinstance(entry["size"], bool)
                or entry["size"] < 0):
            raise BundleValidationError(f"{MANIFEST}: entry {rel!r} needs a sha256 and a size")
    for needed in (STATE, MODEL):
        if prefix + needed not in files:
            raise BundleValidationError(f"{MANIFEST} does not list {needed}")
    return manifest


#: Whether a generation directory can be held open and its payloads opened relative to
#: it (POSIX); elsewhere each payload is opened by path, its last component unfollowed.
_DIR_FD = (hasattr(os, "O_DIRECTORY") and hasattr(os, "O_NOFOLLOW")
           and {os.open, os.stat} <= os.supports_dir_fd and os.scandir in os.supports_fd)


@contextmanager
def _generation(root: Path, generation: str) -> Iterator[int | None]:
    """The live generation directory, opened once without following a symbolic link:
    listing and every payload read go through this descriptor, so the directory cannot
    be swapped (for a link elsewhere) between the checks and the reads."""
    live = generation_dir(generation)
    try:
        info = os.lstat(root / live)
    except FileNotFoundError:
        raise BundleValidationError(f"generation directory {live} is missing") from None
    if not stat.S_ISDIR(info.st_mode):
        raise BundleValidationError(f"generation {live} is not a directory (a symbolic link?)")
    if not _DIR_FD:
        yield None
        return
    try:
        fd = os.open(root / live, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise BundleValidationError(f"generation directory {live} is missing") from None
    except OSError:  # ELOOP / ENOTDIR: swapped for a link or a file after the lstat
        raise BundleValidationError(f"generation {live} is not a directory (a symbolic "
                                    "link?)") from None
    try:
        yield fd
    finally:
        os.close(fd)


def _check_listing(root: Path, manifest: Mapping[str, Any], gen_fd: int | None) -> None:
    """Top level: bundle.json and generation directories only; the live generation
    (``gen_fd``, open): exactly the listed files, each a regular file (nothing
    symlinked or unlisted)."""
    live = generation_dir(manifest["generation"])
    for entry in os.scandir(root):
        mode = entry.stat(follow_symlinks=False).st_mode
        if entry.name == MANIFEST or MANIFEST_TEMP.fullmatch(entry.name):
            continue  # a temp a killed export stranded is never read; the next export clears it
        if is_generation_name(entry.name) and stat.S_ISDIR(mode):
            continue
        raise BundleValidationError(f"{root.as_posix()} holds {entry.name!r}, which is not "
                                    "part of the bundle")
    listed = {rel.split("/", 1)[1] for rel in manifest["files"]}
    present = set()
    for entry in os.scandir(root / live if gen_fd is None else gen_fd):
        if not stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
            raise BundleValidationError(f"{live}/{entry.name} is not a regular file "
                                        "(symbolic links, FIFOs and devices are refused)")
        present.add(entry.name)
    if present - listed:
        raise BundleValidationError(f"{live} holds unlisted file(s) {sorted(present - listed)}")
    if listed - present:
        raise BundleValidationError(f"{live} is missing {sorted(listed - present)}")


def _read_listed(root: Path, manifest: Mapping[str, Any], rel: str,
                 gen_fd: int | None) -> bytes:
    entry = manifest["files"][rel]
    name = rel.split("/", 1)[1]
    bound = MAX_JSON_BYTES if name.endswith(".json") else MAX_TENSOR_BYTES
    if gen_fd is None:
        data = read_regular(root / rel, entry["size"], bound, rel)
    else:
        data = read_regular(Path(name), entry["size"], bound, rel, dir_fd=gen_fd)
    if sha256_hex(data) != entry["sha256"]:
        raise BundleValidationError(f"{rel}: its SHA-256 does not match the manifest (the "
                                    "file was changed or damaged)")
    return data


def _json(data: bytes, rel: str) -> Any:
    try:
        return load_json(data=data, where=rel, max_bytes=MAX_JSON_BYTES, strict=True)
    except ValueError as exc:
        raise BundleValidationError(str(exc)) from None


def _state(data: bytes, rel: str, generation: str) -> dict[str, Any]:
    state = _json(data, rel)
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise BundleValidationError(f"{rel} is not a bundle state ({STATE_FORMAT})")
    if not _STATE_KEYS <= set(state) <= _STATE_KEYS | _OPTIONAL_KEYS:
        raise BundleValidationError(f"{rel}: fields missing {sorted(_STATE_KEYS - set(state))}, "
                                    f"unknown {sorted(set(state) - _STATE_KEYS - _OPTIONAL_KEYS)}")
    if state["version"] != 1 or state["generation"] != generation:
        raise BundleValidationError(f"{rel}: generation {state['generation']!r} / version "
                                    f"{state['version']!r}, the manifest's {generation!r} / 1 "
                                    "(one generation id throughout)")
    source = state["source"]
    if not isinstance(source, dict) or set(source) != _SOURCE_KEYS:
        raise BundleValidationError(f"{rel}: source must hold exactly {sorted(_SOURCE_KEYS)}")
    checks = [
        (state["capability"] in ("resume", "inference"), "capability"),
        (isinstance(source["run_id"], str) and isinstance(source["checkpoint"], str), "source"),
        (isinstance(source["epoch"], int) and not isinstance(source["epoch"], bool), "epoch"),
        (isinstance(state["model"], dict), "model"),
        (state["net"] is None or isinstance(state["net"], dict), "net"),
        (isinstance(state["train"], dict), "train"),
        (isinstance(state["transforms"], list), "transforms"),
        (state["task"] is None or isinstance(state["task"], dict), "task"),
        (isinstance(state["weights"], dict), "weights"),
        (isinstance(state["calibrators"], list)
         and all(isinstance(c, str) and CALIBRATOR.fullmatch(c) for c in state["calibrators"]),
         "calibrators"),
        (state["resume_refusal"] is None or isinstance(state["resume_refusal"], str),
         "resume_refusal"),
        ((state["training"] is None) == (state["capability"] == "inference"), "training"),
        (state.get("preprocessing", PREPROCESSING) == PREPROCESSING, "preprocessing"),
    ]
    for ok, name in checks:
        if not ok:
            raise BundleValidationError(f"{rel}: field {name!r} does not fit the schema")
    return state


def _references(state: Mapping[str, Any], rel: str) -> tuple[dict[str, Any], dict[str, set[str]]]:
    """The state decoded with tensor references kept as strings, and the names each
    payload must hold."""
    refs: dict[str, set[str]] = {MODEL: set(), TRAINING: set()}

    def note(path: str, ref: str) -> TensorRef:
        payload, _, name = ref.partition(":")
        file = {"model": MODEL, "training": TRAINING}.get(payload)
        if file is None or not name or name in refs[file]:
            raise BundleValidationError(f"{rel} {path}: tensor reference {ref!r} is not a "
                                        "unique model:<name> or training:<name>")
        refs[file].add(name)
        return TensorRef(payload, name)

    decoded = {key: decode_value(value, key, note) for key, value in state.items()}
    for key, value in state["weights"].items():
        if value != {"$tensor": f"model:{key}"}:
            raise BundleValidationError(f"{rel} weights.{key}: not a reference to model:{key}")
    return decoded, refs


def load_bundle(path: str | os.PathLike[str], *,
                manifest: Mapping[str, Any] | None = None) -> ValidatedBundle:
    """Every §22 check, in order; the bundle's bytes as they were hashed. ``manifest``:
    check a staged generation against the manifest about to be published instead."""
    root = Path(path)
    if not root.is_dir():
        raise BundleValidationError(f"{root.as_posix()} is not a bundle directory")
    manifest = read_manifest(root) if manifest is None else manifest
    gen = manifest["generation"]
    prefix = generation_dir(gen) + "/"
    with _generation(root, gen) as gen_fd:
        _check_listing(root, manifest, gen_fd)
        payloads = {rel.split("/", 1)[1]: _read_listed(root, manifest, rel, gen_fd)
                    for rel in sorted(manifest["files"])}
    state = _state(payloads[STATE], prefix + STATE, gen)
    decoded, refs = _references(state, prefix + STATE)
    listed_calibrators = sorted(n for n in payloads if CALIBRATOR.fullmatch(n))
    if sorted(state["calibrators"]) != listed_calibrators:
        raise BundleValidationError(f"{prefix}{STATE} names calibrators {state['calibrators']}, "
                                    f"the manifest {listed_calibrators}")
    if (TRAINING in payloads) != (state["capability"] == "resume"):
        raise BundleValidationError(f"a {state['capability']} bundle "
                                    f"{'needs' if TRAINING not in payloads else 'has no'} "
                                    f"{TRAINING}")
    records = []
    for name in state["calibrators"]:
        record = _json(payloads[name], prefix + name)
        problems = calibrator_problems(record, state["task"], prefix + name,
                                       (state["source"]["run_id"], state["source"]["checkpoint"]))
        if problems:
            raise BundleValidationError("; ".join(problems))
        records.append(record)
    for file, names in refs.items():
        if file not in payloads:
            continue
        entries, _, _ = _header(payloads[file], prefix + file)
        if set(entries) != names:
            raise BundleValidationError(
                f"{prefix}{file} holds tensors {sorted(set(entries) - names)[:5]} that state.json "
                f"does not reference, and lacks {sorted(names - set(entries))[:5]}")
    preprocessing = _preprocessing(state, payloads, prefix)
    fingerprint = None
    for name, record in zip(state["calibrators"], records, strict=True):
        if is_fingerprint(record.get("model_id")):
            if fingerprint is None:  # hashed from the payload's bytes: no tensor is built
                fingerprint = codec.payload_fingerprint(payloads[MODEL], prefix + MODEL)
            if record["model_id"] != fingerprint:
                raise BundleValidationError(f"{prefix}{name} is bound to model "
                                            f"{record['model_id']}, the bundled weights are "
                                            f"{fingerprint}")
    info = _info(root, manifest, decoded, records, preprocessing)
    return ValidatedBundle(info, decoded, payloads, tuple(records), preprocessing)


def _preprocessing(state: Mapping[str, Any], payloads: Mapping[str, bytes], prefix: str
                   ) -> Standardizer | None:
    """The shipped preprocessing, rebuilt from its checked state; state.json names it
    exactly when the manifest lists it."""
    named, listed = "preprocessing" in state, PREPROCESSING in payloads
    if named != listed:
        raise BundleValidationError(
            f"{prefix}{STATE} {'names' if named else 'does not name'} {PREPROCESSING}, the "
            f"manifest {'lists' if listed else 'does not list'} it")
    if PREPROCESSING not in payloads:
        return None
    record = _json(payloads[PREPROCESSING], prefix + PREPROCESSING)
    try:
        return read_preprocessing(record, state["net"], prefix + PREPROCESSING)
    except ValueError as exc:
        raise BundleValidationError(str(exc)) from None


def _header(data: bytes, where: str) -> Any:
    try:
        return codec.read_header(data, where)
    except ValueError as exc:
        raise BundleValidationError(str(exc)) from None


def _info(root: Path, manifest: Mapping[str, Any], state: Mapping[str, Any],
          records: list[Any] | None, preprocessing: Standardizer | None = None) -> BundleInfo:
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


def inspect_bundle(path: str | os.PathLike[str]) -> BundleInfo:
    """A bundle's summary from its manifest and state.json (checked against the
    manifest's size and SHA-256, strict JSON); no tensor payload is read."""
    root = Path(path)
    if not root.is_dir():
        raise BundleValidationError(f"{root.as_posix()} is not a bundle directory")
    manifest = read_manifest(root)
    rel = generation_dir(manifest["generation"]) + "/" + STATE
    with _generation(root, manifest["generation"]) as gen_fd:
        data = _read_listed(root, manifest, rel, gen_fd)
    state = _state(data, rel, manifest["generation"])
    decoded, _ = _references(state, rel)
    return _info(root, manifest, decoded, None)


def validate_bundle(path: str | os.PathLike[str]) -> BundleInfo:
    """Every §22 check (BundleValidationError naming the first failure); the bundle's
    :class:`BundleInfo` when it passes. No tensor is built."""
    return load_bundle(path).info
