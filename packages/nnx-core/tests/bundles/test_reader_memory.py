"""The strict reader runs in memory linear in a bundle's documents (issue 36, item 1):
a 20 MB string in state.json or in a safetensors header's metadata peaks at no more
than four times its size in inspect_bundle / validate_bundle (tracemalloc), and a
header above the cap is a named BundleValidationError, refused unread."""

from __future__ import annotations

import json
import sys
import tracemalloc

import pytest
from _support.bundles import live_generation, rewrite, rewrite_state, state, train

from nnx._foundation.bounded import load_json
from nnx._persistence import safetensors_codec as codec
from nnx.bundles import BundleValidationError, export_bundle, inspect_bundle, validate_bundle

#: The string's size in the file (bytes of its JSON text).
SIZE = 20 * 1024 * 1024
#: A plain run of letters, and one that is mostly escapes and brackets (the worst case
#: for a string pattern that steps through escapes one repetition at a time).
TEXTS = {"plain": "a", "escapes": '\\"[{\n'}
#: Python 3.10's re has no possessive quantifiers (nnx._foundation.bounded): there a
#: string of escapes costs a frame per escape, so only the plain case is bounded.
KINDS = [pytest.param(kind, marks=pytest.mark.skipif(
    kind == "escapes" and sys.version_info < (3, 11),
    reason="Python 3.10's re keeps a frame per escape")) for kind in sorted(TEXTS)]


def _string(kind: str) -> str:
    """A string whose JSON text is SIZE bytes (give or take one unit)."""
    unit = TEXTS[kind]
    return unit * (SIZE // len(json.dumps(unit)[1:-1]))


@pytest.fixture(scope="module")
def bundle_source(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return train(root, n_epochs=1), root


def _peak(call, *args):
    call(*args)  # once untraced: lazy imports and caches are not the reader's memory
    tracemalloc.start()
    try:
        call(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _bundle(bundle_source, tmp_path):
    run, root = bundle_source
    export_bundle(run.id, tmp_path / "b", root=root)
    return tmp_path / "b"


@pytest.mark.parametrize("kind", KINDS)
def test_a_20_mb_string_in_state_json_peaks_under_four_times_its_size(bundle_source,
                                                                      tmp_path, kind):
    path = _bundle(bundle_source, tmp_path)
    document = state(path)
    big = _string(kind)
    document["train"]["note"] = big
    rewrite_state(path, document)
    text = len(json.dumps(big).encode())
    assert inspect_bundle(path).path == path  # the string is read, not refused
    assert _peak(inspect_bundle, path) <= 4 * text
    assert _peak(validate_bundle, path) <= 4 * text


@pytest.mark.parametrize("kind", KINDS)
def test_a_20_mb_metadata_string_in_a_safetensors_header_peaks_under_four_times(
        bundle_source, tmp_path, kind):
    path = _bundle(bundle_source, tmp_path)
    payload = (live_generation(path) / "model.safetensors").read_bytes()
    big = _string(kind)
    rewrite(path, "model.safetensors",
            codec.encode(codec.decode(payload, "model"), metadata={"note": big}))
    text = len(json.dumps(big).encode())
    assert validate_bundle(path).path == path
    assert _peak(validate_bundle, path) <= 4 * text


def test_a_header_above_the_cap_is_a_named_bundle_error_read_or_not(bundle_source, tmp_path,
                                                                    monkeypatch):
    # The cap is lowered to 1 MiB, so a header "near the cap" costs a megabyte here
    # rather than the real cap's 100 MiB.
    monkeypatch.setattr(codec, "MAX_HEADER_BYTES", 1024 * 1024)
    path = _bundle(bundle_source, tmp_path)
    tensors = codec.decode((live_generation(path) / "model.safetensors").read_bytes(), "model")
    header = len(codec.encode(tensors)) - sum(t.numel() * t.element_size()
                                              for t in tensors.values()) - 8
    under = codec.encode(tensors, metadata={"n": "x" * (1024 * 1024 - header - 64)})
    rewrite(path, "model.safetensors", under)
    assert validate_bundle(path).path == path  # just under the cap: read and accepted
    over = codec.encode(tensors, metadata={"n": "x" * (1024 * 1024)})
    rewrite(path, "model.safetensors", over)
    with pytest.raises(BundleValidationError, match=r"model\.safetensors declares a \d+-byte "
                                                    r"header, above the 1048576-byte cap"):
        validate_bundle(path)
    # A length field claiming an absurd header is refused the same way, whatever follows.
    rewrite(path, "model.safetensors", (2**62).to_bytes(8, "little") + over[8:])
    with pytest.raises(BundleValidationError, match="above the 1048576-byte cap"):
        validate_bundle(path)


def test_an_unterminated_string_of_escaped_quotes_is_refused_in_one_pass():
    # Each escaped quote could restart a string scan; the scan stops at the first
    # unterminated string instead, so this is one pass, not one per quote.
    with pytest.raises(ValueError, match="not JSON"):
        load_json(data='["' + '\\"' * 200_000, strict=True)
    with pytest.raises(ValueError, match="not JSON"):
        load_json(data=b'["' + b'\\"' * 200_000, strict=True)


def test_a_memoryview_reads_like_the_bytes_it_shows():
    raw = b'xx{"a": ["]", {"b": "\\u00e9"}]}yy'
    assert load_json(data=memoryview(raw)[2:-2], strict=True) == {"a": ["]", {"b": "é"}]}
    with pytest.raises(ValueError, match="not JSON"):
        load_json(data=memoryview(b'{"a": "\xff"}'), strict=True)
