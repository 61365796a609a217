"""Reading a run bundle (spec §22): inspect_bundle, validate_bundle, load_bundle.

Every check runs on bytes, before any tensor is built: the manifest and the
directory listing agree (nothing missing, unlisted or symlinked, one generation
throughout), each payload's size (checked on the open file before it is read)
and SHA-256, strict JSON (duplicate keys and runaway nesting refused before
parsing), the state's schema, calibrator labels and class counts against the
task, each safetensors header against the tensors state.json references, and
last a calibrator's fingerprint model_id against the weights hashed straight
from the payload. Nothing here unpickles, calls a model factory or downloads,
whatever else lies beside the bundle.

The bytes on disk are checked by :mod:`nnx._persistence.bundle_listing`; here, what
they hold.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nnx._foundation.bounded import load_json
from nnx._persistence import safetensors_codec as codec
from nnx._persistence.bundle_format import (
    CALIBRATOR,
    MAX_JSON_BYTES,
    MODEL,
    PREPROCESSING,
    STATE,
    STATE_FORMAT,
    TRAINING,
    BundleValidationError,
    TensorRef,
    decode_value,
    generation_dir,
)
from nnx._persistence.bundle_info import BundleInfo, ValidatedBundle, build_info
from nnx._persistence.bundle_listing import (
    check_listing,
    check_written,
    open_generation,
    read_listed,
    read_manifest,
)
from nnx._persistence.bundle_records import (
    calibrator_problems,
    is_fingerprint,
    read_preprocessing,
)
from nnx._persistence.flattened_tensor import FLAT_SEPARATOR
from nnx.preprocessing import Standardizer

__all__ = ["inspect_bundle", "load_bundle", "validate_bundle"]

_STATE_KEYS = {"format", "version", "generation", "capability", "source", "model", "net",
               "train", "transforms", "task", "weights", "training", "record", "calibrators",
               "resume_refusal"}
#: Present only when used (a bundle without preprocessing reads as before it existed).
_OPTIONAL_KEYS = {"preprocessing", "flattened_weights"}
_SOURCE_KEYS = {"run_id", "checkpoint", "epoch", "checkpoint_generation", "checkpoint_id",
                "attempt_id"}


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
    _check_flattened(state, rel)
    return decoded, refs


def _check_flattened(state: Mapping[str, Any], rel: str) -> None:
    """``flattened_weights`` (a tensor subclass per state key: type name, metadata text,
    outer size, inner tensors referenced as ``model:<key>#<name>``), its keys apart from
    ``weights``'."""
    flattened = state.get("flattened_weights", {})
    if not isinstance(flattened, dict) or (
            "flattened_weights" in state and not flattened):
        raise BundleValidationError(f"{rel}: field 'flattened_weights' does not fit the schema")
    for key, entry in flattened.items():
        ok = (key not in state["weights"] and isinstance(entry, dict)
              and set(entry) == {"type", "meta", "size", "inner"}
              and isinstance(entry["type"], str) and isinstance(entry["meta"], str)
              and isinstance(entry["size"], list)
              and all(type(n) is int and n >= 0 for n in entry["size"])
              and isinstance(entry["inner"], dict) and bool(entry["inner"])
              and all(ref == {"$tensor": f"model:{key}{FLAT_SEPARATOR}{name}"}
                      for name, ref in entry["inner"].items()))
        if not ok:
            raise BundleValidationError(f"{rel} flattened_weights.{key}: not a tensor subclass "
                                        f"entry whose inner tensors are model:{key}"
                                        f"{FLAT_SEPARATOR}<name>")


def load_bundle(path: str | os.PathLike[str], *,
                manifest: Mapping[str, Any] | None = None,
                written: Mapping[str, bytes] | None = None) -> ValidatedBundle:
    """Every §22 check, in order; the bundle's bytes as they were hashed (each payload
    read once, its digest taken from the bytes read). ``manifest`` and ``written``: check
    a staged generation, against the manifest about to be published, as the export that
    just wrote it: ``written`` holds the bytes it wrote and hashed while writing them, so
    the listing and each file's size are checked on disk and the rest on those bytes,
    and nothing just written is read back."""
    root = Path(path)
    if not root.is_dir():
        raise BundleValidationError(f"{root.as_posix()} is not a bundle directory")
    manifest = read_manifest(root) if manifest is None else manifest
    gen = manifest["generation"]
    prefix = generation_dir(gen) + "/"
    with open_generation(root, gen) as gen_fd:
        check_listing(root, manifest, gen_fd)
        if written is None:
            payloads = {rel.split("/", 1)[1]: read_listed(root, manifest, rel, gen_fd)
                        for rel in sorted(manifest["files"])}
        else:
            payloads = check_written(root, manifest, written, gen_fd)
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
    headers = {}
    for file, names in refs.items():
        if file not in payloads:
            continue
        headers[file] = _header(payloads[file], prefix + file)
        entries = headers[file][0]
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
    info = build_info(root, manifest, decoded, records, preprocessing)
    return ValidatedBundle(info, decoded, payloads, tuple(records), preprocessing, headers)


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


def inspect_bundle(path: str | os.PathLike[str]) -> BundleInfo:
    """A bundle's summary from its manifest and state.json (checked against the
    manifest's size and SHA-256, strict JSON); no tensor payload is read."""
    root = Path(path)
    if not root.is_dir():
        raise BundleValidationError(f"{root.as_posix()} is not a bundle directory")
    manifest = read_manifest(root)
    rel = generation_dir(manifest["generation"]) + "/" + STATE
    with open_generation(root, manifest["generation"]) as gen_fd:
        data = read_listed(root, manifest, rel, gen_fd)
    state = _state(data, rel, manifest["generation"])
    decoded, _ = _references(state, rel)
    return build_info(root, manifest, decoded, None)


def validate_bundle(path: str | os.PathLike[str]) -> BundleInfo:
    """Every §22 check (BundleValidationError naming the first failure); the bundle's
    :class:`BundleInfo` when it passes. No tensor is built."""
    return load_bundle(path).info
