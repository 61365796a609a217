"""Typed questions (spec §17): Choice, Boolean and Score, with a content digest.

An option's ``id`` is bookkeeping (what an answer is keyed by, what a teacher
record names); its ``description`` is the model-facing text. A question's state is
primitive JSON (``nnx.decision-question/1``); ``digest()`` is the SHA-256 of its
canonical form, so reordering or rewording an option (or the prompt) changes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from nnx.decisions.errors import InvalidDecisionRequest
from nnx.extend import canonical_bytes, sha256_hex

__all__ = ["FORMAT", "Boolean", "Choice", "Option", "Question", "Score", "question_from_state"]

FORMAT = "nnx.decision-question/1"


def _text(what: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidDecisionRequest(f"{what} must be a non-empty string; got {value!r:.80}")
    return value


@dataclass(frozen=True)
class Option:
    """One answer a Choice or Score offers: ``id`` (bookkeeping) and ``description``
    (the text a model sees)."""

    id: str
    description: str

    def __post_init__(self) -> None:
        _text("Option.id", self.id)
        _text(f"Option {self.id!r} description", self.description)


def _options(what: str, raw: Any) -> tuple[Option, ...]:
    """Options from Option objects, ``(id, description)`` pairs or a mapping id ->
    description (its order is the options' order); at least two, ids unique."""
    if isinstance(raw, Mapping):
        raw = list(raw.items())
    if isinstance(raw, (str, bytes)) or not hasattr(raw, "__iter__"):
        raise InvalidDecisionRequest(f"{what} must be a sequence of options; got {raw!r:.80}")
    options = []
    for item in raw:
        if isinstance(item, Option):
            options.append(item)
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            options.append(Option(item[0], item[1]))
        else:
            raise InvalidDecisionRequest(f"{what}: each option is an Option or an "
                                         f"(id, description) pair; got {item!r:.80}")
    if len(options) < 2:
        raise InvalidDecisionRequest(f"{what} needs at least 2 options; got {len(options)}")
    ids = [o.id for o in options]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise InvalidDecisionRequest(f"{what} repeats option id(s) {repeated}")
    return tuple(options)


class _Question:
    KIND: ClassVar[str]
    prompt: str

    def to_state(self) -> dict[str, Any]:
        """The question as primitive JSON (``nnx.decision-question/1``)."""
        raise NotImplementedError

    def digest(self) -> str:
        """SHA-256 of the canonical state: any change of kind, prompt, option order,
        id or description gives another digest."""
        return sha256_hex(canonical_bytes(self.to_state()))


@dataclass(frozen=True)
class Choice(_Question):
    """Pick one of 2+ options; the answer is a distribution over their ids."""

    KIND: ClassVar[str] = "choice"
    prompt: str
    options: tuple[Option, ...]

    def __post_init__(self) -> None:
        _text("Choice.prompt", self.prompt)
        object.__setattr__(self, "options", _options("Choice.options", self.options))

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(o.id for o in self.options)

    def to_state(self) -> dict[str, Any]:
        return {"format": FORMAT, "kind": self.KIND, "prompt": self.prompt,
                "options": [{"id": o.id, "description": o.description} for o in self.options]}


@dataclass(frozen=True)
class Score(_Question):
    """Rate on 2+ ordered levels (lowest first); the answer is a distribution over
    the levels and ``ScoreResult.expected_index`` is ordinal."""

    KIND: ClassVar[str] = "score"
    prompt: str
    levels: tuple[Option, ...]

    def __post_init__(self) -> None:
        _text("Score.prompt", self.prompt)
        object.__setattr__(self, "levels", _options("Score.levels", self.levels))

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(o.id for o in self.levels)

    def to_state(self) -> dict[str, Any]:
        return {"format": FORMAT, "kind": self.KIND, "prompt": self.prompt,
                "levels": [{"id": o.id, "description": o.description} for o in self.levels]}


@dataclass(frozen=True)
class Boolean(_Question):
    """A yes / no question; the answer is one probability, ``p_true``."""

    KIND: ClassVar[str] = "boolean"
    prompt: str

    def __post_init__(self) -> None:
        _text("Boolean.prompt", self.prompt)

    def to_state(self) -> dict[str, Any]:
        return {"format": FORMAT, "kind": self.KIND, "prompt": self.prompt}


Question = Choice | Boolean | Score
_KINDS: dict[str, type[Choice] | type[Boolean] | type[Score]] = {
    "choice": Choice, "boolean": Boolean, "score": Score}
_KEYS = {"choice": "options", "score": "levels", "boolean": None}


def _option_state(what: str, raw: Any) -> list[tuple[Any, Any]]:
    if not isinstance(raw, list):
        raise InvalidDecisionRequest(f"{what} must be a list of {{id, description}} objects")
    pairs = []
    for item in raw:
        if not isinstance(item, Mapping) or set(item) != {"id", "description"}:
            raise InvalidDecisionRequest(f"{what}: each entry has exactly the keys id and "
                                         f"description; got {item!r:.80}")
        pairs.append((item["id"], item["description"]))
    return pairs


def question_from_state(state: Any) -> Question:
    """The typed question of a plain-data state (what ``to_state`` wrote, the format
    key optional); anything else raises InvalidDecisionRequest, never a bare KeyError."""
    if isinstance(state, (Choice, Boolean, Score)):
        return state
    if not isinstance(state, Mapping):
        raise InvalidDecisionRequest(f"a question state is a mapping; got "
                                     f"{type(state).__name__}")
    if state.get("format", FORMAT) != FORMAT:
        raise InvalidDecisionRequest(f"format must be {FORMAT!r}; got {state.get('format')!r}")
    kind = state.get("kind")
    if kind not in _KINDS:
        raise InvalidDecisionRequest(f"kind must be one of {list(_KINDS)}; got {kind!r:.40}")
    key = _KEYS[kind]
    allowed = {"format", "kind", "prompt"} | ({key} if key else set())
    unknown = sorted(map(str, set(state) - allowed))
    missing = sorted(allowed - {"format"} - set(state))
    if unknown or missing:
        raise InvalidDecisionRequest(f"a {kind} question state needs exactly "
                                     f"{sorted(allowed - {'format'})}; missing {missing}, "
                                     f"unknown {unknown}")
    if key is None:
        return Boolean(state["prompt"])
    cls = _KINDS[kind]
    return cls(state["prompt"], _option_state(f"{kind}.{key}", state[key]))  # type: ignore[call-arg,arg-type]
