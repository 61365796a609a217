"""write_gguf writes the file once, in place: gguf's writer fills nnx-core's atomic temp
beside the destination, which is renamed over it; a failed export leaves the previous file
byte for byte and no temporary behind."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

import numpy as np
import pytest
import torch
from _interop_tiny import tiny_net, tiny_tokenizer

import nnx.interop.document as document
from nnx.interop import write_gguf

_real_gguf_array = document.gguf_array


class _Spy(np.ndarray):
    """A tensor's array that records which file gguf writes it into."""

    files: list[os.stat_result]

    def tofile(self, fid: Any, *args: Any, **kwargs: Any) -> None:
        _Spy.files.append(os.fstat(fid.fileno()))
        np.asarray(self).tofile(fid, *args, **kwargs)


class _Failing(np.ndarray):
    """A tensor's array whose write fails, after part of the file is on disk."""

    written_before: list[int]

    def tofile(self, fid: IO[bytes], *args: Any, **kwargs: Any) -> None:
        fid.flush()
        _Failing.written_before.append(os.fstat(fid.fileno()).st_size)
        raise RuntimeError("the tensor could not be written")


def test_the_tensors_go_straight_into_the_file_that_becomes_the_export(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _Spy.files = []

    def spied(tensor: torch.Tensor) -> tuple[np.ndarray, Any]:
        array, raw = _real_gguf_array(tensor)
        return array.view(_Spy), raw

    monkeypatch.setattr(document, "gguf_array", spied)
    out = tmp_path / "m.gguf"
    report = write_gguf(tiny_net(), out, tokenizer=tiny_tokenizer())
    final = os.stat(out)
    assert len(_Spy.files) == len(report.tensors)
    # The rename keeps the inode: every tensor was written into the exported file itself,
    # never into a staging copy elsewhere.
    assert {(s.st_dev, s.st_ino) for s in _Spy.files} == {(final.st_dev, final.st_ino)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.gguf"]


@pytest.mark.parametrize("previous", [True, False])
def test_an_export_failing_midway_leaves_the_previous_file_and_no_temp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, previous: bool) -> None:
    out = tmp_path / "m.gguf"
    if previous:
        write_gguf(tiny_net(seed=1), out)
    before = out.read_bytes() if previous else None
    _Failing.written_before = []
    calls = []

    def failing_fifth(tensor: torch.Tensor) -> tuple[np.ndarray, Any]:
        array, raw = _real_gguf_array(tensor)
        calls.append(tensor)
        return (array.view(_Failing) if len(calls) == 5 else array), raw

    monkeypatch.setattr(document, "gguf_array", failing_fifth)
    with pytest.raises(RuntimeError, match="could not be written"):
        write_gguf(tiny_net(seed=2), out, overwrite=True, tokenizer=tiny_tokenizer())
    # It failed midway: the header, the metadata and four tensors were already written.
    assert _Failing.written_before and _Failing.written_before[0] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == (["m.gguf"] if previous else [])
    if previous:
        assert out.read_bytes() == before
