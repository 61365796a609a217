"""§27: a Result has no truth value; Ok(0), Ok(None) and Ok(False) are successes."""

from __future__ import annotations

import pytest

from nnx.result import Err, Ok


@pytest.mark.parametrize("value", [0, None, False])
def test_falsy_values_are_successes(value: object) -> None:
    result = Ok(value)
    assert result.is_ok and isinstance(result, Ok) and result.unwrap() is value


@pytest.mark.parametrize("result", [Ok(0), Ok(None), Ok(False), Ok(1), Err(0), Err("e")])
def test_a_result_has_no_truth_value(result: object) -> None:
    with pytest.raises(TypeError, match="no truth value"):
        bool(result)
    with pytest.raises(TypeError, match="no truth value"):
        if result:  # the slip the rule exists for
            pass
