"""ExperimentManifest: the declared intent and its fingerprint (spec §4.4).

The hashed document is ``{"format": "nnx.provenance/1", <field>: <value>...}``
with unset fields omitted, encoded by :func:`nnx._foundation.hashing.canonical_bytes`
(UTF-8 JSON, sorted keys, arrays in order). The fingerprint is its SHA-256.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NoReturn

from nnx._foundation.hashing import canonical_bytes, sha256_hex
from nnx.provenance._describe import model_descriptor, model_task, training_config
from nnx.provenance._files import loads
from nnx.provenance._values import freeze, thaw
from nnx.provenance.identity import IdentityRef

__all__ = ["FIELDS", "FORMAT", "ExperimentManifest"]

#: The format version, inside the hashed document.
FORMAT = "nnx.provenance/1"
#: The manifest's fields, in their documented order.
FIELDS = ("task", "labels", "model", "data", "splits", "objective", "config", "preprocessing")


def _reference(value: Any, path: str, *, digests: bool) -> Any:
    """A data / split entry: strings are declared, None unknown, digest() verified."""
    if isinstance(value, str):
        return IdentityRef("declared", value) if value else _refuse(path, "an empty name")
    if value is None:
        return IdentityRef.unknown()
    digest = getattr(value, "digest", None)
    if digests and callable(digest) and not isinstance(value, (type, IdentityRef)):
        hexdigest = digest()
        if not isinstance(hexdigest, str):
            raise ValueError(f"{path}: digest() returned {type(hexdigest).__name__}, "
                             "not a hex string")
        try:
            return IdentityRef("digest", hexdigest)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    return value


def _refuse(path: str, what: str) -> NoReturn:
    raise ValueError(f"{path}: {what} is not an identity")


def _references(value: Any, field: str, *, digests: bool) -> Any:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(f"{field}: must be a mapping of name -> identity; "
                         f"got {type(value).__name__}")
    out: dict[str, Any] = {}
    for name, item in value.items():
        if not isinstance(name, str):
            raise ValueError(f"{field}: names must be strings; got {name!r}")
        out[name] = _reference(item, f"{field}.{name}", digests=digests)
    return out


def _preprocessing(value: Any) -> Any:
    """A fitted preprocessor (state() + digest()) is recorded as its state and digest."""
    state, digest = getattr(value, "state", None), getattr(value, "digest", None)
    if callable(state) and callable(digest) and not isinstance(value, type):
        return {"state": state(), "digest": _reference(value, "preprocessing", digests=True)}
    return value


class ExperimentManifest:
    """The declared intent of an experiment; immutable, compared by canonical bytes.

    Keyword fields hold JSON-like values: ``task``, ``labels`` (a list),
    ``model``, ``data`` / ``splits`` (mappings of name -> identity: an
    :class:`IdentityRef`, a declared name string, ``None`` for unknown, or for
    splits an object with ``digest()``), ``objective``, ``config`` and
    ``preprocessing`` (JSON-like, or an object with ``state()`` and ``digest()``).
    """

    __slots__ = ("_bytes", "_document", "_fingerprint")

    _document: Mapping[str, Any]
    _bytes: bytes
    _fingerprint: str

    def __init__(self, *, task: Any = None, labels: Any = None, model: Any = None,
                 data: Any = None, splits: Any = None, objective: Any = None,
                 config: Any = None, preprocessing: Any = None) -> None:
        if labels is not None and not isinstance(labels, (list, tuple)):
            raise ValueError(f"labels: must be a list; got {type(labels).__name__}")
        given = {"task": task, "labels": labels, "model": model,
                 "data": _references(data, "data", digests=False),
                 "splits": _references(splits, "splits", digests=True),
                 "objective": objective, "config": config,
                 "preprocessing": _preprocessing(preprocessing)}
        document: dict[str, Any] = {"format": FORMAT}
        for name in FIELDS:
            if given[name] is not None:
                document[name] = freeze(given[name], name)
        encoded = canonical_bytes(document)
        object.__setattr__(self, "_document", MappingProxyType(document))
        object.__setattr__(self, "_bytes", encoded)
        object.__setattr__(self, "_fingerprint", sha256_hex(encoded))

    @classmethod
    def for_model(cls, model: Any, *, train: Any = None, data: Any = None, splits: Any = None,
                  objective: Any = None, labels: Any = None,
                  preprocessing: Any = None) -> ExperimentManifest:
        """The plan of training ``model``: its task and descriptor, the config if given.

        ``train`` (an NNTrainParams) is recorded without n_epochs, resume_epochs,
        parent_run_id and parent_checkpoint, so a resume keeps the fingerprint.
        """
        return cls(task=model_task(model), labels=labels, model=model_descriptor(model),
                   data=data, splits=splits, objective=objective,
                   config=None if train is None else training_config(train),
                   preprocessing=preprocessing)

    # -- the fields -------------------------------------------------------------------
    def _get(self, name: str) -> Any:
        return self._document.get(name)

    @property
    def task(self) -> Any:
        return self._get("task")

    @property
    def labels(self) -> Any:
        return self._get("labels")

    @property
    def model(self) -> Any:
        return self._get("model")

    @property
    def data(self) -> Any:
        return self._get("data")

    @property
    def splits(self) -> Any:
        return self._get("splits")

    @property
    def objective(self) -> Any:
        return self._get("objective")

    @property
    def config(self) -> Any:
        return self._get("config")

    @property
    def preprocessing(self) -> Any:
        return self._get("preprocessing")

    # -- identity ---------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """SHA-256 hex of :meth:`canonical_bytes`."""
        return self._fingerprint

    def canonical_bytes(self) -> bytes:
        return self._bytes

    def document(self) -> dict[str, Any]:
        """The hashed document as plain dicts and lists (a fresh copy)."""
        result: dict[str, Any] = thaw(self._document)
        return result

    def to_json(self) -> str:
        return json.dumps(self.document(), sort_keys=True, indent=2, ensure_ascii=False,
                          allow_nan=False) + "\n"

    @classmethod
    def from_document(cls, document: Any) -> ExperimentManifest:
        """Rebuild from :meth:`document`; the format must be ``nnx.provenance/1``."""
        if not isinstance(document, Mapping):
            raise ValueError(f"a manifest document is a mapping; got {type(document).__name__}")
        if document.get("format") != FORMAT:
            raise ValueError(f"manifest format must be {FORMAT!r}; "
                             f"got {document.get('format')!r}")
        unknown = sorted(set(document) - set(FIELDS) - {"format"})
        if unknown:
            raise ValueError(f"manifest has unknown field(s) {', '.join(unknown)}")
        return cls(**{k: v for k, v in document.items() if k != "format"})

    @classmethod
    def from_json(cls, text: str | bytes) -> ExperimentManifest:
        return cls.from_document(loads(text))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ExperimentManifest is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ExperimentManifest is immutable; cannot delete {name!r}")

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return (ExperimentManifest.from_document, (self.document(),))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExperimentManifest):
            return NotImplemented
        return self._bytes == other._bytes

    def __hash__(self) -> int:
        return hash(self._fingerprint)

    def __repr__(self) -> str:
        fields = ", ".join(name for name in FIELDS if name in self._document)
        return f"ExperimentManifest(fingerprint={self._fingerprint[:12]}..., fields=[{fields}])"
