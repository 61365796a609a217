"""Adapter files carry the SHA-256 of their tensors (issue 9): a load checks it, and every
failure to read a file names it (issue 8). A refused load changes no tensor of the
module and writes nothing."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from _peft_tiny import assert_unchanged, snapshot
from torch import nn

from nnx.peft import (
    AdapterFileError,
    apply_ia3_to,
    apply_lora_to,
    load_ia3_weights,
    load_lora_weights,
    save_ia3_weights,
    save_lora_weights,
)
from nnx.peft.adapter_files import tensors_digest


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))


def _lora(seed: int = 0) -> nn.Module:
    net = _net(seed)
    apply_lora_to(net, "0", "2", r=2, alpha=4.0)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if "lora_B" in name:
                p.normal_()  # B starts at zero: give the file something to carry
    return net


def _ia3(seed: int = 0) -> nn.Module:
    net = _net(seed)
    apply_ia3_to(net, "0", "2")
    with torch.no_grad():
        for name, p in net.named_parameters():
            if "scaling" in name:
                p.uniform_(0.5, 1.5)
    return net


KINDS = {"lora": (_lora, save_lora_weights, load_lora_weights, "load_lora_weights"),
         "ia3": (_ia3, save_ia3_weights, load_ia3_weights, "load_ia3_weights")}


def _refused(path: Path, kind: str, match: str | None) -> AdapterFileError:
    build, _, load, what = KINDS[kind]
    fresh = build(seed=1)
    before, on_disk = snapshot(fresh), path.read_bytes()
    with pytest.raises(AdapterFileError, match=match) as info:
        load(fresh, path)
    assert_unchanged(fresh, before)
    assert path.read_bytes() == on_disk and sorted(p.name for p in path.parent.iterdir()) == [
        path.name]
    message = str(info.value)
    assert message.startswith(f"{what}: adapter file {path.as_posix()}: ") and "\n" not in message
    assert info.value.path == path and isinstance(info.value, ValueError)
    return info.value


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_file_records_its_tensors_digest_and_loads_back(tmp_path: Path, kind: str) -> None:
    build, save, load, _ = KINDS[kind]
    net = build()
    path = save(net, tmp_path / "adapter.pt")
    saved = torch.load(path, weights_only=True)
    assert saved.nnx_adapter == {"format": "nnx.adapter/1", "sha256": tensors_digest(saved)}
    fresh = build()
    with torch.no_grad():
        for p in fresh.parameters():
            if p.requires_grad:
                p.add_(1.0)  # adapters that differ from the file's until it loads
    assert load(fresh, path) == len(saved)
    x = torch.randn(5, 4)
    assert torch.equal(fresh(x), net(x))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_altered_tensor_under_the_saved_digest_is_refused(tmp_path: Path, kind: str) -> None:
    build, save, _, _ = KINDS[kind]
    path = save(build(), tmp_path / "adapter.pt")
    state = torch.load(path, weights_only=True)
    name = sorted(state)[0]
    state[name].view(-1)[0] += 1.0  # the saved digest rides along on the re-save
    torch.save(state, path)
    assert torch.load(path, weights_only=True).nnx_adapter["sha256"] != tensors_digest(
        torch.load(path, weights_only=True))
    _refused(path, kind, "do not match the SHA-256 they were saved with")


def test_a_flipped_byte_inside_a_tensor_is_refused(tmp_path: Path) -> None:
    net = _lora()
    path = save_lora_weights(net, tmp_path / "adapter.pt")
    data = bytearray(path.read_bytes())
    raw = net[2].lora_B.weight.detach().numpy().tobytes()
    at = bytes(data).find(raw)
    assert at > 0  # torch stores tensor bytes uncompressed
    data[at + 5] ^= 0x40
    path.write_bytes(bytes(data))
    # torch's zip reader checks no CRC: the digest is what catches it.
    _refused(path, "lora", "do not match the SHA-256 they were saved with")


def test_a_truncated_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = save_lora_weights(_lora(), tmp_path / "adapter.pt")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    error = _refused(path, "lora", None)
    assert error.reason  # torch's own error, on one line


def test_a_file_that_is_not_a_state_dict_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "adapter.pt"
    torch.save([torch.zeros(2)], path)
    _refused(path, "lora", "holds a list, not a state dict")


def test_a_file_without_a_digest_loads_as_before(tmp_path: Path) -> None:
    # What an earlier release wrote: a plain dict of the owned tensors.
    net = _lora()
    path = tmp_path / "old.pt"
    torch.save({k: v.detach() for k, v in torch.load(
        save_lora_weights(net, tmp_path / "new.pt"), weights_only=True).items()}, path)
    assert not hasattr(torch.load(path, weights_only=True), "nnx_adapter")
    fresh = _lora()
    with torch.no_grad():
        fresh[0].lora_B.weight.zero_()
        fresh[2].lora_B.weight.zero_()
    assert load_lora_weights(fresh, path) == 4
    x = torch.randn(3, 4)
    assert torch.equal(fresh(x), net(x))


def test_the_digest_covers_names_dtypes_shapes_and_bytes() -> None:
    base = OrderedDict(a=torch.arange(6, dtype=torch.float32).reshape(2, 3))
    digest = tensors_digest(base)
    assert tensors_digest(OrderedDict(b=base["a"])) != digest
    assert tensors_digest(OrderedDict(a=base["a"].double())) != digest
    assert tensors_digest(OrderedDict(a=base["a"].reshape(3, 2))) != digest
    assert tensors_digest(OrderedDict(a=base["a"].t().contiguous().t())) == digest  # layout
    assert tensors_digest({"x": torch.ones(1), "a": base["a"]}) == tensors_digest(
        {"a": base["a"], "x": torch.ones(1)})  # order-free
