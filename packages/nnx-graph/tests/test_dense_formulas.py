"""Each graph layer equals its dense formula to 1e-5 on small random graphs (issue 39)."""

from __future__ import annotations

import pytest
import torch

from nnx import Nets, NNParams
from nnx.graph import GraphAttNN, GraphConvNN, GraphInputs, GraphSageNN

N, F, C = 7, 5, 3


def _graph(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Features, a random directed edge list without self loops, and its dense
    adjacency ``A[i, j] = 1`` for an edge ``j -> i`` (row i aggregates over j)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, F, generator=g)
    adj = (torch.rand(N, N, generator=g) < 0.35).float()
    adj.fill_diagonal_(0.0)
    dst, src = adj.nonzero(as_tuple=True)
    return x, torch.stack([src, dst]), adj


def _one_layer(net_cls: type, **extra: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return net_cls(NNParams(input_dim=F, output_dim=C, **extra)).eval()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gcn_is_normalised_adjacency_times_xw(seed: int) -> None:
    x, edge_index, adj = _graph(seed)
    net = _one_layer(GraphConvNN)
    conv = net.convs[0]
    a_hat = adj + torch.eye(N)
    d = a_hat.sum(1).pow(-0.5)
    dense = d[:, None] * a_hat * d[None, :] @ (x @ conv.lin.weight.T) + conv.bias
    torch.testing.assert_close(net(x, edge_index), dense, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("width", [C, 2 * F])  # narrowing: projected before the mean
def test_sage_is_mean_of_neighbours_plus_root(seed: int, width: int) -> None:
    x, edge_index, adj = _graph(seed)
    torch.manual_seed(0)
    net = GraphSageNN(NNParams(input_dim=F, output_dim=width)).eval()
    conv = net.convs[0]
    deg = adj.sum(1, keepdim=True).clamp(min=1)  # an isolated node aggregates zeros
    mean = (adj @ x) / deg
    dense = mean @ conv.lin_l.weight.T + conv.lin_l.bias + x @ conv.lin_r.weight.T
    torch.testing.assert_close(net(x, edge_index), dense, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gat_is_a_masked_softmax_over_neighbours_and_self(seed: int) -> None:
    x, edge_index, adj = _graph(seed)
    net = _one_layer(GraphAttNN, n_heads=2)
    conv = net.convs[0]
    h = (x @ conv.lin.weight.T).view(N, 2, C)  # (node, head, channel)
    src_score = (h * conv.att_src).sum(-1)  # (N, heads)
    dst_score = (h * conv.att_dst).sum(-1)
    logits = torch.nn.functional.leaky_relu(
        dst_score.T[:, :, None] + src_score.T[:, None, :], 0.2)  # (heads, i, j)
    mask = (adj + torch.eye(N)) > 0
    alpha = torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1)
    per_head = torch.einsum("hij,jhc->ihc", alpha, h)
    dense = per_head.mean(1) + conv.bias  # output layer: heads averaged
    torch.testing.assert_close(net(x, edge_index), dense, atol=1e-5, rtol=1e-5)


def test_two_layers_compose_and_seed_rows_are_sliced() -> None:
    x, edge_index, _ = _graph(3)
    torch.manual_seed(0)
    net = GraphSageNN(NNParams(input_dim=F, output_dim=C, hidden_dims=(4,))).eval()
    full = net(x, edge_index)
    seed = torch.tensor([5, 1])
    inputs = GraphInputs(x, edge_index, seed, torch.arange(N) + 100)
    torch.testing.assert_close(net(inputs), full[seed])
    assert inputs.seed_ids.tolist() == [105, 101]


@pytest.mark.parametrize(("member", "cls"), [("GRAPH_CONV", GraphConvNN),
                                             ("GRAPH_SAGE", GraphSageNN),
                                             ("GRAPH_ATT", GraphAttNN)])
def test_nets_members_build_through_the_entry_points(member: str, cls: type) -> None:
    net = Nets[member](params=NNParams(input_dim=F, output_dim=C, hidden_dims=(4,)))
    assert type(net) is cls and getattr(Nets, member) is Nets[member]
    x, edge_index, _ = _graph(4)
    assert net(x, edge_index).shape == (N, C)


def test_graph_nets_refuse_a_lazy_input_width() -> None:
    with pytest.raises(ValueError, match="input_dim"):
        GraphConvNN(NNParams(input_dim=None, output_dim=C))


def test_gat_hidden_heads_are_concatenated_and_output_heads_averaged() -> None:
    # n_heads (spec §2's NNParams shape field): a hidden layer of width h is h * heads wide
    # (heads side by side), the output layer averages its heads to output_dim logits.
    x, edge_index, _ = _graph(5)
    torch.manual_seed(0)
    net = GraphAttNN(NNParams(input_dim=F, output_dim=C, hidden_dims=(4,), n_heads=3)).eval()
    first, last = net.convs
    assert (first.heads, first.concat, first.out_channels) == (3, True, 4)
    assert (last.heads, last.concat, last.in_channels) == (3, False, 12)
    hidden = first(x, edge_index)
    assert hidden.shape == (N, 12)
    torch.testing.assert_close(net(x, edge_index), last(torch.relu(hidden), edge_index))
