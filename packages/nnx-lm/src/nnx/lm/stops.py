"""Stop sequences for ``GenerativeNNModel.generate`` (docs/lm.md §6).

A stop is text (``str``, needs a text prompt) or token ids (an id, a list of
ids, or a list of such lists). Text stops are matched on the decoded
continuation, so one may span token boundaries; id stops are matched on the
tail of the generated ids. The tokenizer's eos id, when it has one, always
stops. Only generated tokens are matched (never the prompt), generation ends
at the token that completes the first match, and the stop itself is not part
of the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nnx.extend import check_count
from nnx.lm.tokenizer import NNTokenizerParams

__all__ = ["StopMatcher"]


class StopMatcher:
    """Parses ``stop`` once (validated before decoding starts), then checks each step."""

    __slots__ = ("_eos", "_ids", "_strings", "_tokenizer")

    def __init__(self, stop: Any, *, text: bool, tokenizer: NNTokenizerParams | None) -> None:
        self._tokenizer = tokenizer
        self._eos = None if tokenizer is None else tokenizer.eos_id
        self._strings: tuple[str, ...] = ()
        self._ids: tuple[tuple[int, ...], ...] = ()
        if stop is None:
            return
        items = [stop] if isinstance(stop, (str, int)) else stop
        if not isinstance(items, Sequence) or not items:
            raise ValueError(f"generate stop must be a str, an id, a list of ids or a non-empty "
                             f"list of those; got {stop!r}")
        if isinstance(stop, int) or all(isinstance(s, int) for s in items):
            items = [items]  # one id sequence
        if all(isinstance(s, str) for s in items):
            if not text:
                raise ValueError("generate: text stop sequences need a text prompt "
                                 "(and a tokenizer); give token ids for an id prompt")
            if not all(items):
                raise ValueError("generate stop: an empty string would stop at once")
            self._strings = tuple(str(s) for s in items)
            return
        self._ids = tuple(_id_sequence(i, s) for i, s in enumerate(items))

    def done(self, out: list[int]) -> bool:
        """Whether the ids generated so far end with (or, as text, contain) a stop."""
        if self._eos is not None and out[-1] == self._eos:
            return True
        if any(len(s) <= len(out) and tuple(out[-len(s):]) == s for s in self._ids):
            return True
        if self._strings:
            assert self._tokenizer is not None  # text stops need a text prompt
            decoded = self._tokenizer.decode(out)
            return any(s in decoded for s in self._strings)
        return False

    def trim(self, out: list[int]) -> list[int]:
        """``out`` without a final eos or id stop."""
        if self._eos is not None and out and out[-1] == self._eos:
            return out[:-1]
        for s in self._ids:
            if len(s) <= len(out) and tuple(out[-len(s):]) == s:
                return out[:-len(s)]
        return out

    def trim_text(self, decoded: str) -> str:
        """``decoded`` cut before its first text stop."""
        cuts = [decoded.find(s) for s in self._strings if s in decoded]
        return decoded[:min(cuts)] if cuts else decoded


def _id_sequence(index: int, value: Any) -> tuple[int, ...]:
    field = f"generate stop[{index}]"
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"{field} must be a non-empty list of token ids (not mixed with text); "
                         f"got {value!r}")
    return tuple(check_count(f"{field}[{j}]", v, minimum=0) for j, v in enumerate(value))
