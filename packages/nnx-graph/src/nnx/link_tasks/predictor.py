"""The link predictor recipe: ``link_predictor_spec(...)``, rebuilt on reload (spec §26).

``link_predictor_spec`` returns core's :class:`~nnx.ModelSpec` naming the model factory
``link.predictor@v1``, which nnx-graph announces as an ``nnx.model_factories`` entry point.
A run records only the spec (id, version, plain config, seed), so ``NNRun.load``,
``NNModel.from_checkpoint`` and ``from_pretrained`` rebuild the same module through the
registry, with nothing registered by hand.

The module is ``net(x, edge_index, edge_label_index) -> logits``: an encoder embeds every
node over the message graph ``edge_index``, then a decoder scores each candidate pair
``edge_label_index[:, k] = (u, v)``, giving (K,) logits, or (K, categories) with
``categories``.

* Encoder: GCN / GraphSAGE / GAT (nnx.graph's node nets), ``hidden_dims`` layers wide,
  activation and dropout between layers and none after the last, so embeddings (and a dot
  product of them) range over all reals.
* Decoders, both symmetric in (u, v), so u → v and v → u score alike (a directed task
  needs an asymmetric module of its own):
  ``"dot"``: ``<h_u, h_v>``; with categories, one learned weight per embedding dimension
  and category, ``sum_d h_u[d] h_v[d] W[c, d] + b[c]``.
  ``"mlp"``: a one-hidden-layer MLP over ``[h_u * h_v, h_u + h_v]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from nnx import Activations, ModelSpec
from nnx.extend import NNParams, check_choice, check_count, check_optional_count
from nnx.graph.nets import GraphAttNN, GraphConvNN, GraphSageNN

__all__ = ["LINK_PREDICTOR_ID", "LINK_PREDICTOR_VERSION", "LinkPredictor",
           "build_link_predictor", "link_predictor_spec"]

#: The registered factory's identity: bump the version whenever it builds something else.
LINK_PREDICTOR_ID = "link.predictor"
LINK_PREDICTOR_VERSION = 1

_ENCODERS: dict[str, type[nn.Module]] = {
    "graph_conv": GraphConvNN, "graph_sage": GraphSageNN, "graph_att": GraphAttNN}
_DECODERS = ("dot", "mlp")
_KEYS = ("input_dim", "hidden_dims", "encoder", "decoder", "categories", "activation",
         "dropout", "n_heads", "decoder_hidden")


def link_predictor_spec(*, input_dim: int, hidden_dims: Sequence[int],
                        encoder: str = "graph_conv", decoder: str = "dot",
                        categories: int | Sequence[str] | None = None,
                        activation: str | Activations = "relu", dropout: float = 0.0,
                        n_heads: int = 1, decoder_hidden: int | None = None,
                        seed: int = 0) -> ModelSpec:
    """The recipe of a link predictor, as a registered :class:`~nnx.ModelSpec`.

    ``hidden_dims``: the encoder's layer widths, the last one the embedding width (at
    least one layer). ``categories``: None for binary links, else the number of edge
    categories (or their names, of which only the count is kept). ``activation`` /
    ``dropout`` apply between encoder layers (and in the MLP decoder); ``n_heads`` is
    GAT's; ``decoder_hidden`` is the MLP decoder's width (default: the embedding width).
    ``seed`` initialises the weights (the same spec always builds the same weights).
    Every value is checked here, before anything is built.
    """
    if categories is not None and not isinstance(categories, int):
        if isinstance(categories, (str, bytes)) or not isinstance(categories, Sequence):
            raise ValueError(f"link_predictor_spec: categories must be None, a count or a "
                             f"sequence of category names; got {categories!r}")
        categories = len(categories)
    config = _checked_config({
        "input_dim": input_dim, "hidden_dims": hidden_dims, "encoder": encoder,
        "decoder": decoder, "categories": categories, "activation": activation,
        "dropout": dropout, "n_heads": n_heads, "decoder_hidden": decoder_hidden})
    return ModelSpec(LINK_PREDICTOR_ID, LINK_PREDICTOR_VERSION, config, seed=seed)


def build_link_predictor(config: Mapping[str, Any]) -> LinkPredictor:
    """The ``link.predictor@v1`` model factory: ``factory(config)`` (spec §3.2)."""
    return LinkPredictor(**_checked_config(config))


def _checked_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Every key present, checked and in its plain JSON form: what a spec records."""
    unknown = sorted(set(raw) - set(_KEYS))
    missing = sorted({"input_dim", "hidden_dims"} - set(raw))
    if unknown or missing:
        raise ValueError(f"link predictor config: unknown keys {unknown}, missing keys "
                         f"{missing} (it takes {', '.join(_KEYS)})")
    hidden = tuple(raw["hidden_dims"]) if isinstance(raw["hidden_dims"], Sequence) else ()
    if not hidden:
        raise ValueError(f"link predictor hidden_dims must list at least one layer width "
                         f"(the last is the embedding width); got {raw['hidden_dims']!r}")
    input_dim = check_count("link predictor input_dim", raw["input_dim"])
    # NNParams checks the encoder's other fields as every node net's are checked.
    params = NNParams(input_dim=input_dim, hidden_dims=hidden[:-1],
                      output_dim=hidden[-1], activation=raw.get("activation", "relu"),
                      dropout_prob=raw.get("dropout", 0.0), n_heads=raw.get("n_heads", 1))
    return {
        "input_dim": input_dim,
        "hidden_dims": [*params.hidden_dims, params.output_dim],
        "encoder": check_choice("link predictor encoder", raw.get("encoder", "graph_conv"),
                                _ENCODERS),
        "decoder": check_choice("link predictor decoder", raw.get("decoder", "dot"),
                                _DECODERS),
        "categories": check_optional_count("link predictor categories",
                                           raw.get("categories"), minimum=2,
                                           none_means="binary links"),
        "activation": params.activation.value,
        "dropout": params.dropout_prob,
        "n_heads": params.n_heads,
        "decoder_hidden": check_optional_count("link predictor decoder_hidden",
                                               raw.get("decoder_hidden"),
                                               none_means="the embedding width"),
    }


class LinkPredictor(nn.Module):
    """An encoder over the message graph and a symmetric pair decoder (module docstring)."""

    def __init__(self, *, input_dim: int, hidden_dims: Sequence[int], encoder: str,
                 decoder: str, categories: int | None, activation: str, dropout: float,
                 n_heads: int | None, decoder_hidden: int | None) -> None:
        super().__init__()
        width = hidden_dims[-1]
        self.categories = categories
        self.decoder = decoder
        self.encoder = _ENCODERS[encoder](NNParams(
            input_dim=input_dim, hidden_dims=tuple(hidden_dims[:-1]), output_dim=width,
            activation=Activations(activation), dropout_prob=dropout, n_heads=n_heads))
        out = 1 if categories is None else categories
        self.head: nn.Module
        if decoder == "mlp":
            inner = decoder_hidden or width
            self.head = nn.Sequential(nn.Linear(2 * width, inner), Activations(activation)(),
                                      nn.Dropout(dropout), nn.Linear(inner, out))
        elif categories is not None:
            self.head = nn.Linear(width, categories)  # per-category weighted dot
        else:
            self.head = nn.Identity()  # the plain dot product has no weights

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor,
                edge_label_index: torch.Tensor) -> torch.Tensor:
        if edge_label_index.dim() != 2 or edge_label_index.shape[0] != 2:
            raise ValueError(f"LinkPredictor: edge_label_index must be (2, K) candidate "
                             f"pairs; got shape {tuple(edge_label_index.shape)}")
        h = self.encoder(x, edge_index)
        hu, hv = h[edge_label_index[0]], h[edge_label_index[1]]
        # Every decoder input is symmetric in (u, v): the product, and for the MLP the sum.
        pair = torch.cat([hu * hv, hu + hv], dim=-1) if self.decoder == "mlp" else hu * hv
        if self.decoder == "dot" and self.categories is None:
            return pair.sum(-1)
        logits: torch.Tensor = self.head(pair)
        return logits.squeeze(-1) if self.categories is None else logits
