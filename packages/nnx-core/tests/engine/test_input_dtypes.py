"""Inputs whose dtype is not the net's are named as such, not as torch's "mat1 and mat2
must have the same dtype" (training, evaluate and predict share the one forward)."""

from __future__ import annotations

import pytest
import torch
from _nnx_core_tiny import tiny_batches, tiny_model

from nnx import NNTrainParams


@pytest.mark.parametrize(("cast", "dtype"), [(torch.Tensor.double, "float64"),
                                             (torch.Tensor.long, "int64")])
def test_a_dtype_mismatch_names_the_inputs_dtype_and_the_nets(tmp_path, cast, dtype):
    batches = [(cast(x), y) for x, y in tiny_batches()]
    model = tiny_model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    message = (rf"training batch's inputs do not match the net: input 0 is {dtype}, but the "
               r"net's parameters are float32; convert the inputs with x\.float\(\)")
    with pytest.raises(RuntimeError, match=message) as caught:
        model.train(NNTrainParams(n_epochs=1, train_loader=batches), root=tmp_path,
                    verbose=False)
    assert "mat1 and mat2" in str(caught.value.__cause__)  # torch's own error stays chained
    with pytest.raises(RuntimeError, match=rf"batch's inputs do not match the net: input 0 "
                                           rf"is {dtype}, but the net's parameters are "
                                           r"float32"):
        model.predict(batches[0][0])
    with pytest.raises(RuntimeError, match=rf"input 0 is {dtype}.*float32"):
        model.evaluate(batches)
    assert all(torch.equal(v, before[k]) for k, v in model.net.state_dict().items())
    model.predict(batches[0][0].float())  # converted as the message says, it runs


class Failing(torch.nn.Module):
    """Raises a dtype-sounding error of its own although its input matches its weights."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        raise RuntimeError("expected scalar type Float but found Float (from a custom op)")


def test_other_runtime_errors_pass_through_unchanged():
    from nnx import NNModel

    with pytest.raises(RuntimeError, match=r"^expected scalar type Float but found Float"):
        NNModel(module=Failing()).predict(torch.randn(2, 4))
