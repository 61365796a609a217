"""preserved_state: the §13.2 non-destructive mode contract."""

from __future__ import annotations

import pytest
from torch import nn

from nnx._foundation.modes import preserved_state


def mixed_tree() -> nn.Sequential:
    """Root in train mode, a backbone deliberately in eval, one dropout inside it training."""
    backbone = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2), nn.Dropout(0.5))
    head = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    model = nn.Sequential(backbone, head)
    model.train()
    backbone.eval()
    backbone[2].train()
    return model


def flags(module: nn.Module) -> list[bool]:
    return [m.training for m in module.modules()]


@pytest.mark.parametrize(("mode", "expected"), [("eval", False), ("train", True)])
def test_switches_whole_tree_then_restores_mixed_flags(mode, expected):
    model = mixed_tree()
    before = flags(model)
    assert len(set(before)) == 2  # genuinely mixed
    with preserved_state(model, mode=mode) as inside:
        assert inside is model
        assert flags(model) == [expected] * len(before)
    assert flags(model) == before


def test_restores_mixed_tree_after_exception():
    model = mixed_tree()
    before = flags(model)
    with pytest.raises(RuntimeError, match="boom"), preserved_state(model, mode="eval"):
        assert not any(flags(model))
        raise RuntimeError("boom")
    assert flags(model) == before


def test_mode_none_leaves_modes_but_undoes_body_changes():
    model = mixed_tree()
    before = flags(model)
    with preserved_state(model, mode=None):
        assert flags(model) == before
        model.eval()
    assert flags(model) == before


def test_restores_flags_directly_not_through_overridden_train():
    class Sticky(nn.Module):
        """A module whose train() refuses to leave eval (a frozen-BN style override)."""

        def train(self, mode: bool = True) -> Sticky:
            return super().train(False)

    model = nn.Sequential(Sticky(), nn.Linear(1, 1))
    model.training = True
    model[0].training = True
    with preserved_state(model, mode="eval"):
        pass
    assert flags(model) == [True, True, True]


@pytest.mark.parametrize("mode", ["inference", "Eval", True])
def test_bad_mode_refused_and_nothing_changed(mode):
    model = mixed_tree()
    before = flags(model)
    with pytest.raises(ValueError, match="mode"), preserved_state(model, mode=mode):
        pytest.fail("body must not run")
    assert flags(model) == before


def test_non_module_refused():
    with pytest.raises(ValueError, match=r"nn\.Module"), preserved_state(object(), mode="eval"):
        pytest.fail("body must not run")
