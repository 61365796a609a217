"""DiffusionMLP (spec §9.2): forward(x, t), validation, and the §9 NNModel(module=...) snippet."""

from __future__ import annotations

import pytest
import torch

from nnx import Losses, NNModel, NNModelParams
from nnx.diffusion import DiffusionMLP
from nnx.diffusion.net import sinusoidal_embedding


def test_forward_predicts_noise_shaped_like_x_for_per_row_and_scalar_t():
    torch.manual_seed(0)
    net = DiffusionMLP(input_dim=6, hidden_dims=[8, 8], time_embed_dim=4)
    x = torch.randn(5, 2, 3)  # flattened to 6 per row
    t = torch.tensor([0, 1, 2, 3, 4])
    assert net(x, t).shape == (5, 2, 3)
    rows = net(x, torch.full((5,), 3))
    torch.testing.assert_close(net(x, 3), rows)  # a scalar t applies to every row


def test_the_time_code_changes_the_prediction():
    torch.manual_seed(0)
    net = DiffusionMLP(input_dim=2, hidden_dims=[8], time_embed_dim=8)
    x = torch.randn(3, 2)
    assert not torch.allclose(net(x, 0), net(x, 500))


def test_the_sinusoidal_embedding_is_sin_then_cos_of_t_times_the_frequencies():
    freqs = torch.tensor([1.0, 0.1])
    emb = sinusoidal_embedding(torch.tensor([2]), freqs)
    torch.testing.assert_close(emb, torch.tensor([[torch.sin(torch.tensor(2.0)),
                                                   torch.sin(torch.tensor(0.2)),
                                                   torch.cos(torch.tensor(2.0)),
                                                   torch.cos(torch.tensor(0.2))]]))


def test_the_frequencies_are_a_non_persistent_buffer():
    net = DiffusionMLP(input_dim=2, hidden_dims=[4], time_embed_dim=6)
    assert "freqs" not in net.state_dict() and net.freqs.shape == (3,)


@pytest.mark.parametrize("kwargs, match", [
    ({"input_dim": 0, "hidden_dims": [4], "time_embed_dim": 4}, "input_dim"),
    ({"input_dim": 2, "hidden_dims": [], "time_embed_dim": 4}, "hidden_dims"),
    ({"input_dim": 2, "hidden_dims": [0], "time_embed_dim": 4}, "hidden_dims"),
    ({"input_dim": 2, "hidden_dims": [4], "time_embed_dim": 5}, "even"),
    ({"input_dim": 2, "hidden_dims": [4], "time_embed_dim": 0}, "time_embed_dim"),
])
def test_bad_shapes_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DiffusionMLP(**kwargs)


def test_samples_of_the_wrong_size_are_refused():
    net = DiffusionMLP(input_dim=2, hidden_dims=[4], time_embed_dim=4)
    with pytest.raises(ValueError, match=r"input_dim=2.*3 elements"):
        net(torch.randn(4, 3), torch.zeros(4, dtype=torch.long))


def test_the_spec_snippet_wraps_it_with_nn_model_module():
    model = NNModel(
        module=DiffusionMLP(input_dim=2, hidden_dims=[64, 64], time_embed_dim=16),
        params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR),
    )
    assert isinstance(model.net, DiffusionMLP)
    out = model.forward_raw((torch.randn(3, 2), torch.tensor([0, 5, 9])))
    assert out.shape == (3, 2)
