"""NNParams' public hooks (issue 25): validate, omit_from_state, field_name; the old
``_validate`` / ``_omit_from_state`` / ``_name`` spellings work for one more release."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from nnx.extend import NNParams, check_real, set_field


@dataclass(frozen=True, slots=True, kw_only=True)
class Scaled(NNParams):
    scale: float = 1.0
    doubled: float = 0.0

    def validate(self) -> None:
        NNParams.validate(self)
        set_field(self, "scale", check_real(self.field_name("scale"), self.scale))
        set_field(self, "doubled", 2 * self.scale)

    def omit_from_state(self, name: str, value: object) -> bool:
        return name == "doubled" or NNParams.omit_from_state(self, name, value)


def test_the_public_hooks_are_what_the_constructor_and_state_call():
    params = Scaled(input_dim=2, output_dim=3, scale=1.5)
    assert params.doubled == 3.0 and "doubled" not in params.state()
    assert Scaled.from_state(params.state()) == params
    with pytest.raises(ValueError, match=r"Scaled\.scale"):
        Scaled(input_dim=2, output_dim=3, scale=float("nan"))
    with pytest.raises(ValueError, match=r"Scaled\.output_dim"):
        Scaled(input_dim=2, output_dim=0)


def test_an_old_style_subclass_still_works_and_is_warned_about():
    with pytest.warns(DeprecationWarning) as seen:
        @dataclass(frozen=True, slots=True, kw_only=True)
        class Old(NNParams):
            scale: float = 1.0

            def _validate(self) -> None:
                NNParams._validate(self)
                set_field(self, "scale", check_real(self._name("scale"), self.scale))

            def _omit_from_state(self, name: str, value: object) -> bool:
                return name == "scale" or NNParams._omit_from_state(self, name, value)

    messages = sorted(str(w.message).rpartition("Old.")[2] for w in seen)
    assert messages == [
        "_omit_from_state is deprecated and will be removed in the next release: override "
        "omit_from_state instead",
        "_validate is deprecated and will be removed in the next release: override validate "
        "instead"]
    params = Old(input_dim=2, output_dim=3, scale=2.0)
    assert "scale" not in params.state()  # the old omit hook ran
    with pytest.raises(ValueError, match=r"Old\.scale"):  # the old validate hook ran
        Old(input_dim=2, output_dim=3, scale=float("inf"))
    with pytest.raises(ValueError, match=r"Old\.input_dim"):  # and reached the base's
        Old(input_dim=-1, output_dim=3)


def test_the_hook_rename_moves_no_state():
    plain = NNParams(input_dim=4, output_dim=3, hidden_dims=(8,), activations=None)
    assert plain.state() == {"input_dim": 4, "output_dim": 3, "hidden_dims": [8],
                             "dropout_prob": 0.0, "activation": "RELU"}
    assert NNParams._validate is NNParams.validate  # the alias is the hook itself
