"""Hugging Face Llama interop: a checkpoint directory ↔ TransformerNN.

A directory as ``transformers`` writes it (``config.json`` + ``model.safetensors``,
or sharded with ``model.safetensors.index.json``) loads into a TransformerNN,
and a TransformerNN writes one back that ``LlamaForCausalLM.from_pretrained``
reads. The layouts agree except the fused QKV projection, which is split and
joined here. RoPE uses Llama's "rotate half" channel pairing, so q/k load
unpermuted. ``transformers`` itself is never imported.

The directory is read under nnx-core's path rule: ``config.json`` and the index
through the bounded JSON reader, and every shard the index names must be a
plain file name of the directory itself (never absolute, no ``..`` or
separator, not a symbolic link), so an index cannot make the loader read a
file elsewhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save

from nnx import CheckpointReadError
from nnx.extend import (
    BUILD_FAILURES,
    UnsafePathError,
    atomic_write_bytes,
    atomic_write_text,
    cause_line,
    inside,
    load_json,
    unbuildable,
)
from nnx.lm.net import TransformerNN
from nnx.lm.params import NNTransformerParams

__all__ = ["llama_config", "llama_params", "load_llama", "save_llama"]

_CONFIG = "config.json"
_WEIGHTS = "model.safetensors"
_INDEX = "model.safetensors.index.json"


def llama_params(config: Mapping[str, Any], *, max_seq_len: int | None = None
                 ) -> NNTransformerParams:
    """NNTransformerParams for a Llama ``config.json``; refuses what TransformerNN lacks.

    ``max_seq_len`` caps the context (the RoPE table is built for every position);
    by default it is the checkpoint's ``max_position_embeddings``.
    """
    where = "Llama config"
    if config.get("model_type", "llama") != "llama":
        raise ValueError(f"{where}: model_type must be 'llama'; got {config.get('model_type')!r}")
    heads = config["num_attention_heads"]
    if config.get("num_key_value_heads", heads) != heads:
        raise ValueError(f"{where}: grouped-query attention (num_key_value_heads="
                         f"{config['num_key_value_heads']} != {heads}) is not supported")
    d_model = config["hidden_size"]
    if config.get("head_dim", d_model // heads) * heads != d_model:
        raise ValueError(f"{where}: head_dim × num_attention_heads must equal hidden_size")
    for flag in ("attention_bias", "mlp_bias"):
        if config.get(flag, False):
            raise ValueError(f"{where}: {flag}=true is not supported (TransformerNN has none)")
    if config.get("hidden_act", "silu") != "silu":
        raise ValueError(f"{where}: hidden_act must be 'silu'; got {config['hidden_act']!r}")
    mult, dim = _ffn(config["intermediate_size"], d_model)
    return NNTransformerParams(
        vocab_size=config["vocab_size"], d_model=d_model, n_heads=heads,
        n_layers=config["num_hidden_layers"],
        max_seq_len=config["max_position_embeddings"] if max_seq_len is None else max_seq_len,
        ffn_mult=mult, ffn_dim=dim, rope_base=_rope_base(config),
        norm_eps=config.get("rms_norm_eps", 1e-6),
        tie_embeddings=bool(config.get("tie_word_embeddings", False)),
        attn_dropout=config.get("attention_dropout", 0.0))


def _ffn(width: int, d_model: int) -> tuple[int, int | None]:
    # (ffn_mult, ffn_dim): the multiple when there is one, so the usual configs keep
    # ffn_dim out of state().
    if isinstance(width, int) and isinstance(d_model, int) and width % d_model == 0:
        return width // d_model, None
    return 4, width


def _rope_base(config: Mapping[str, Any]) -> float:
    # transformers 5 nests rope_theta in rope_parameters; older configs hold it flat.
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind != "default":
        raise ValueError(f"Llama config: rope_type {kind!r} is not supported (only 'default')")
    base: float = rope.get("rope_theta", config.get("rope_theta", 10000.0))
    return base


def llama_config(params: NNTransformerParams) -> dict[str, Any]:
    """The ``config.json`` of a LlamaForCausalLM with ``params``' shape."""
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": params.vocab_size, "hidden_size": params.d_model,
        "intermediate_size": params.ffn_width, "num_hidden_layers": params.n_layers,
        "num_attention_heads": params.n_heads, "num_key_value_heads": params.n_heads,
        "head_dim": params.head_dim, "hidden_act": "silu",
        "max_position_embeddings": params.max_seq_len, "rms_norm_eps": params.norm_eps,
        "rope_parameters": {"rope_theta": params.rope_base, "rope_type": "default"},
        "tie_word_embeddings": params.tie_embeddings, "attention_bias": False,
        "attention_dropout": params.attn_dropout, "mlp_bias": False, "dtype": "float32",
    }


def _document(path: Path) -> dict[str, Any]:
    """A JSON object of the checkpoint directory, read by the bounded reader."""
    try:
        doc = load_json(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable ({exc})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a JSON object")
    return doc


def _shards(directory: Path, index: Path) -> list[Path]:
    """The shard files ``index`` names, each a plain file of ``directory``."""
    weight_map = _document(index).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{index}: no weight_map of tensor names to shard files")
    paths: dict[str, Path] = {}
    for shard in weight_map.values():
        try:
            # Names only: a Hugging Face cache snapshot links every file into its blob
            # store, so a link is how shards arrive; the index can still name nothing
            # but a file of this directory.
            paths[shard] = inside(directory, shard, what="shard file name", links=True)
        except UnsafePathError as exc:
            raise ValueError(f"{index}: shard {shard!r} is refused: {exc}") from None
    return [paths[name] for name in sorted(paths)]


def _read_file(path: Path) -> dict[str, torch.Tensor]:
    """One safetensors file's tensors; a torn or foreign file, or a header declaring a shape
    whose size overflows, is CheckpointReadError naming the file (never the raw
    SafetensorError)."""
    try:
        return load_file(path)
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise CheckpointReadError(path, cause_line(exc)) from exc


def _read_weights(directory: Path) -> dict[str, torch.Tensor]:
    index = directory / _INDEX
    if index.is_file():
        weights: dict[str, torch.Tensor] = {}
        for shard in _shards(directory, index):  # all are checked before any is read
            weights.update(_read_file(shard))
        return weights
    return _read_file(directory / _WEIGHTS)


def _our_state(where: Path, params: NNTransformerParams, weights: dict[str, torch.Tensor]
               ) -> dict[str, torch.Tensor]:
    """The Llama tensors under TransformerNN's names; a tensor the config calls for but the
    weights lack, or one left over, is CheckpointReadError naming the directory."""
    def take(name: str) -> torch.Tensor:
        if name not in weights:
            raise CheckpointReadError(where, f"its config calls for {name}, which the "
                                      "weights lack")
        return weights.pop(name)

    state = {"embed.weight": take("model.embed_tokens.weight"),
             "norm.weight": take("model.norm.weight")}
    head = weights.pop("lm_head.weight", None)
    if not params.tie_embeddings:
        if head is None:
            raise CheckpointReadError(where, "untied embeddings but no lm_head.weight")
        state["lm_head.weight"] = head
    for i in range(params.n_layers):
        src, dst = f"model.layers.{i}.", f"blocks.{i}."
        parts = [take(f"{src}self_attn.{p}_proj.weight") for p in "qkv"]
        if len({tuple(t.shape[1:]) for t in parts}) != 1:
            raise CheckpointReadError(where, f"layer {i}'s q, k and v projections differ in "
                                      "width")
        state[dst + "attn.qkv.weight"] = torch.cat(parts, dim=0)
        for ours, theirs in _LAYER_NAMES.items():
            state[dst + ours] = take(src + theirs)
    # Rotary tables some exporters store are recomputed from the config.
    leftover = sorted(k for k in weights if not k.endswith("rotary_emb.inv_freq"))
    if leftover:
        raise CheckpointReadError(where, f"weights TransformerNN has no place for: "
                                  f"{', '.join(leftover[:5])}")
    return state


def _fitting_net(config: Path, params: NNTransformerParams,
                 state: dict[str, torch.Tensor]) -> TransformerNN:
    """The TransformerNN ``params`` describe, built only once the weights fit it: it is
    first built on the meta device (no memory, no RNG draw), so a config declaring absurd
    sizes is refused by name before anything is allocated."""
    try:
        with torch.device("meta"):
            skeleton = TransformerNN(params)
    except BUILD_FAILURES as exc:
        raise unbuildable(config, "Llama config", exc) from exc
    expected = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    differ = sorted(f"{k} {tuple(state[k].shape)} vs {shape}" for k, shape in expected.items()
                    if k in state and tuple(state[k].shape) != shape)
    if differ:
        raise CheckpointReadError(config, f"the weights do not fit the net it declares "
                                  f"(saved vs declared: {'; '.join(differ[:3])})")
    return TransformerNN(params)


def load_llama(path: str | os.PathLike[str], *, max_seq_len: int | None = None
               ) -> TransformerNN:
    """A TransformerNN holding the weights of the Llama checkpoint directory ``path``.

    A directory that cannot be loaded raises :class:`nnx.CheckpointReadError` (a
    ValueError) naming the file and what is wrong: a config it cannot read or that
    declares sizes no net can have, a weights file that cannot be read (a header whose
    shape overflows), weights missing, left over or of other shapes than the config's.
    Nothing is allocated for the net before its weights are known to fit.
    """
    directory = Path(path)
    config = directory / _CONFIG
    document = _document(config)
    try:
        params = llama_params(document, max_seq_len=max_seq_len)
    except KeyError as exc:
        raise CheckpointReadError(config, f"it lacks the field {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:  # a field of another type or out of range
        raise CheckpointReadError(config, cause_line(exc)) from exc
    state = _our_state(directory, params, _read_weights(directory))
    net = _fitting_net(config, params, state)
    net.load_state_dict(state, strict=True)
    return net


_LAYER_NAMES = {
    "attn.out.weight": "self_attn.o_proj.weight",
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn.gate.weight": "mlp.gate_proj.weight",
    "ffn.up.weight": "mlp.up_proj.weight",
    "ffn.down.weight": "mlp.down_proj.weight",
}


def save_llama(net: TransformerNN, path: str | os.PathLike[str]) -> Path:
    """Write ``net`` as a Llama checkpoint directory (``config.json`` + ``model.safetensors``).

    Residual dropout has no Llama counterpart and is not written.
    """
    params, state = net.params, net.state_dict()
    out: dict[str, torch.Tensor] = {"model.embed_tokens.weight": state["embed.weight"],
                                    "model.norm.weight": state["norm.weight"]}
    if not params.tie_embeddings:
        out["lm_head.weight"] = state["lm_head.weight"]
    for i in range(params.n_layers):
        src, dst = f"blocks.{i}.", f"model.layers.{i}."
        for name, part in zip("qkv", state[src + "attn.qkv.weight"].chunk(3, dim=0), strict=True):
            out[f"{dst}self_attn.{name}_proj.weight"] = part
        for ours, theirs in _LAYER_NAMES.items():
            out[dst + theirs] = state[src + ours]
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    # safetensors refuses views sharing storage: serialize contiguous copies, then write
    # both files through nnx-core's one atomic writer (a reader never sees half a file).
    weights = save({k: v.detach().contiguous().clone() for k, v in out.items()},
                   metadata={"format": "pt"})
    atomic_write_bytes(directory / _WEIGHTS, weights)
    atomic_write_text(directory / _CONFIG, json.dumps(llama_config(params), indent=2) + "\n")
    return directory
