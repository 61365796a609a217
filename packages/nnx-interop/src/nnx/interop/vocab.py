"""Which llama.cpp tokenizer a ``tokenizers`` tokenizer is: ``tokenizer.ggml.model`` and
``tokenizer.ggml.pre``.

A stock llama.cpp loader tokenizes a ``gpt2`` vocabulary as a byte-level BPE, after
splitting the text the way ``tokenizer.ggml.pre`` names; without the key it warns and
falls back to its ``default`` split, which is not GPT-2's. nnx-interop describes a
tokenizer only where such a loader splits, merges and decodes text exactly as
``tokenizers`` does: a byte-level BPE whose only pre-tokenizer is ``ByteLevel`` with
GPT-2's split and no prefix space (what ``NNTokenizerParams.train`` builds, and GPT-2's
own tokenizer), written as ``gpt2`` / ``gpt-2``. Any other tokenizer (WordPiece, Unigram,
a SentencePiece-style or Llama-3-style BPE, a normalizer, ...) is refused: written as a
``gpt2`` vocabulary it would load and silently tokenize differently.
"""

from __future__ import annotations

from typing import Any

import gguf

from nnx.interop.errors import UnsupportedExportError

__all__ = ["GPT2_MODEL", "GPT2_PRE", "ggml_tokenizer"]

#: llama.cpp's name for a byte-level BPE vocabulary (gguf-py's own BPE vocabulary class).
GPT2_MODEL = gguf.vocab.BpeVocab.tokenizer_model
#: llama.cpp's name for GPT-2's split: the value its converter writes for GPT-2 (gguf-py
#: has no constant for pre-tokenizer names; llama.cpp's loader compares this string).
GPT2_PRE = "gpt-2"

#: BPE model options llama.cpp's byte-level BPE has no counterpart for (off is falsy).
_BPE_OPTIONS = ("dropout", "byte_fallback", "continuing_subword_prefix",
                "end_of_word_suffix", "ignore_merges")
#: Flags of an added token that change how text around it is split.
_ADDED_FLAGS = ("lstrip", "rstrip", "single_word")


def _kind(part: dict[str, Any] | None) -> str | None:
    return None if part is None else str(part.get("type"))


def _differences(spec: dict[str, Any]) -> list[str]:
    """How the tokenizer ``spec`` (its JSON) differs from a GPT-2-style byte-level BPE."""
    model, pre = spec.get("model", {}), spec.get("pre_tokenizer")
    found = []
    if _kind(model) != "BPE":
        found.append(f"a {_kind(model)} model, not a BPE")
    found += [f"the BPE option {o}" for o in _BPE_OPTIONS if model.get(o)]
    if spec.get("normalizer") is not None:
        found.append(f"a {_kind(spec['normalizer'])} normalizer")
    if _kind(pre) != "ByteLevel":
        found.append(f"the pre-tokenizer {_kind(pre)}, not ByteLevel")
    elif pre is not None and (pre.get("add_prefix_space") or not pre.get("use_regex", True)):
        found.append("a ByteLevel pre-tokenizer without GPT-2's split or with a prefix space")
    if _kind(spec.get("decoder")) != "ByteLevel":
        found.append(f"the decoder {_kind(spec.get('decoder'))}, not ByteLevel")
    if _kind(spec.get("post_processor")) not in (None, "ByteLevel"):
        found.append(f"a {_kind(spec['post_processor'])} post-processor")
    found += [f"the added token {t.get('content')!r} with {flag}"
              for t in spec.get("added_tokens", []) if not t.get("special")
              for flag in _ADDED_FLAGS if t.get(flag)]
    return found


def ggml_tokenizer(owner: str, spec: dict[str, Any]) -> tuple[str, str]:
    """(``tokenizer.ggml.model``, ``tokenizer.ggml.pre``) for the tokenizer ``spec``, or
    :class:`UnsupportedExportError` where llama.cpp would tokenize differently."""
    found = _differences(spec)
    if found:
        raise UnsupportedExportError(
            f"{owner}: llama.cpp cannot tokenize as this tokenizer does ({'; '.join(found)}); "
            "only a GPT-2-style byte-level BPE is embedded (to leave the tokenizer out, "
            "export the bare TransformerNN, e.g. model.net, without tokenizer=)")
    return GPT2_MODEL, GPT2_PRE
