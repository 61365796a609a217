"""load_llama under the path rule: a shard the index names is a plain file of the model
directory itself. An absolute, ``..``, nested or symlinked shard is refused with a
ValueError naming the shard and the index before any shard is read, and a deeply nested
index is a ValueError, not a RecursionError. Nothing on disk changes either way."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from nnx.lm.hf import load_llama, save_llama
from nnx.lm.net import TransformerNN
from nnx.lm.params import NNTransformerParams

INDEX = "model.safetensors.index.json"


def tree(base: Path) -> dict[str, object]:
    """Every entry under ``base``, links as their target text (never followed)."""
    found: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            key = path.relative_to(base).as_posix()
            found[key] = (os.readlink(path) if path.is_symlink() else
                          None if path.is_dir() else path.read_bytes())
    return found


@pytest.fixture
def sharded(tmp_path: Path) -> tuple[TransformerNN, Path, Path]:
    """A two-shard Llama directory, and tmp_path/outside holding a copy of a shard."""
    torch.manual_seed(0)
    net = TransformerNN(NNTransformerParams(vocab_size=31, d_model=16, n_heads=2, n_layers=2,
                                            max_seq_len=16))
    directory = save_llama(net, tmp_path / "llama")
    weights = load_file(directory / "model.safetensors")
    (directory / "model.safetensors").unlink()
    names = sorted(weights)
    halves = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    weight_map = {}
    for shard, keys in halves.items():
        save_file({k: weights[k] for k in keys}, directory / shard)
        weight_map.update(dict.fromkeys(keys, shard))
    (directory / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(directory / "model-00002-of-00002.safetensors", outside / "shard.safetensors")
    return net, directory, outside


def _point_second_shard_at(directory: Path, name: str) -> None:
    doc = json.loads((directory / INDEX).read_text())
    second = "model-00002-of-00002.safetensors"
    doc["weight_map"] = {k: (name if v == second else v) for k, v in doc["weight_map"].items()}
    (directory / INDEX).write_text(json.dumps(doc))


def test_a_sharded_directory_loads(sharded) -> None:
    net, directory, _ = sharded
    loaded = load_llama(directory)
    for key, value in net.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key


@pytest.mark.parametrize("shard", ["{outside}/shard.safetensors",
                                   "../outside/shard.safetensors",
                                   "sub/shard.safetensors", "..", ""])
def test_a_shard_outside_the_directory_is_refused(sharded, tmp_path, shard) -> None:
    # The outside copy holds exactly the missing tensors: following it would load.
    _, directory, outside = sharded
    shard = shard.format(outside=outside.as_posix())
    _point_second_shard_at(directory, shard)
    before = tree(tmp_path)
    with pytest.raises(ValueError, match=rf"{INDEX}: shard {shard!r} is refused: .*is not a "
                                         "shard file name"):
        load_llama(directory)
    assert tree(tmp_path) == before


def test_a_shard_linked_as_in_a_hugging_face_cache_loads(sharded, tmp_path) -> None:
    """A cache snapshot links each file into its blob store: the index names a plain file
    of the directory, which may be a link (only the name is the index's to choose)."""
    expected, directory, outside = sharded
    link = directory / "model-00002-of-00002.safetensors"
    blob = outside / "blob"
    link.rename(blob)
    link.symlink_to(blob)
    loaded = load_llama(directory)
    for key, value in expected.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"weight_map": 5}',
                                  '{"weight_map": {"a": 7}}'])
def test_a_malformed_index_is_a_value_error_naming_it(sharded, tmp_path, text) -> None:
    _, directory, _ = sharded
    (directory / INDEX).write_text(text)
    before = tree(tmp_path)
    with pytest.raises(ValueError, match=INDEX):
        load_llama(directory)
    assert tree(tmp_path) == before


def test_a_deeply_nested_config_is_a_value_error_naming_it(sharded) -> None:
    _, directory, _ = sharded
    (directory / "config.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(ValueError, match=r"config\.json: unreadable .*nests too deeply"):
        load_llama(directory)
