"""AttemptRecord: what attempt.json says about one execution (spec §4.4)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nnx._foundation.validation import check_choice, check_count, check_optional_str
from nnx.provenance._values import freeze, thaw

__all__ = ["ATTEMPT_FORMAT", "FINAL_STATUSES", "STATUSES", "AttemptRecord"]

ATTEMPT_FORMAT = "nnx.attempt/1"
#: running, then exactly one of the final statuses.
STATUSES = ("running", "completed", "failed", "cancelled")
FINAL_STATUSES = STATUSES[1:]
_ID = re.compile(r"[0-9a-f]{32}")
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
_FIELDS = ("attempt_id", "fingerprint", "status", "started_at", "finished_at", "last_tag",
           "last_epoch", "last_generation", "error_type", "error_message", "parent", "compile")


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    """One attempt: its id, the plan's fingerprint, its status and what it committed.

    ``last_tag`` / ``last_epoch`` / ``last_generation`` name the last committed
    checkpoint (None before the first commit). ``parent`` is the resumed
    attempt's link (its run, attempt id and checkpoint generation) or None.
    """

    attempt_id: str
    fingerprint: str
    status: str
    started_at: str
    finished_at: str | None = None
    last_tag: str | None = None
    last_epoch: int | None = None
    last_generation: int | None = None
    error_type: str | None = None
    error_message: str | None = None
    parent: Mapping[str, Any] | None = None
    #: The fit's compile record (spec §28) as of the attempt's end; None without compile=.
    compile: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.attempt_id, str) or not _ID.fullmatch(self.attempt_id):
            raise ValueError(f"attempt_id must be 32 lowercase hex digits; got "
                             f"{self.attempt_id!r}")
        if not isinstance(self.fingerprint, str) or not _FINGERPRINT.fullmatch(self.fingerprint):
            raise ValueError(f"fingerprint must be a SHA-256 hex digest; got {self.fingerprint!r}")
        check_choice("AttemptRecord.status", self.status, STATUSES)
        if not isinstance(self.started_at, str) or not self.started_at:
            raise ValueError(f"started_at must be a timestamp string; got {self.started_at!r}")
        for name in ("finished_at", "last_tag", "error_type"):
            check_optional_str(f"AttemptRecord.{name}", getattr(self, name))
        check_optional_str("AttemptRecord.error_message", self.error_message, allow_empty=True)
        for name in ("last_epoch", "last_generation"):
            if getattr(self, name) is not None:
                check_count(f"AttemptRecord.{name}", getattr(self, name), minimum=0)
        if self.parent is not None:
            if not isinstance(self.parent, Mapping):
                raise ValueError(f"parent: must be a mapping; got {type(self.parent).__name__}")
            object.__setattr__(self, "parent", freeze(self.parent, "parent"))
        if self.compile is not None:
            if not isinstance(self.compile, Mapping):
                raise ValueError(f"compile: must be a mapping; got {type(self.compile).__name__}")
            object.__setattr__(self, "compile", freeze(self.compile, "compile"))

    def state(self) -> dict[str, Any]:
        """attempt.json's document."""
        out: dict[str, Any] = {"format": ATTEMPT_FORMAT}
        for name in _FIELDS:
            if name == "compile" and self.compile is None:
                continue  # a fit without compile= writes the attempt as it always did
            out[name] = thaw(getattr(self, name))
        return out

    @classmethod
    def from_state(cls, state: Any) -> AttemptRecord:
        """Read attempt.json's document back, validating every field."""
        if not isinstance(state, Mapping) or state.get("format") != ATTEMPT_FORMAT:
            raise ValueError(f"attempt record format must be {ATTEMPT_FORMAT!r}")
        unknown = sorted(set(state) - set(_FIELDS) - {"format"})
        if unknown:
            raise ValueError(f"attempt record has unknown field(s) {', '.join(unknown)}")
        missing = sorted({"attempt_id", "fingerprint", "status", "started_at"} - set(state))
        if missing:
            raise ValueError(f"attempt record lacks {', '.join(missing)}")
        return cls(**{k: v for k, v in state.items() if k != "format"})
