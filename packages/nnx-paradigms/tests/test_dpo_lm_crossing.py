"""The crossing rule: nnx-paradigms imports without nnx-lm, and DPO's dataset and factory
raise core's one install hint naming ``pip install nnx-lm`` (absence simulated by
blocking the import, ``sys.modules["nnx.lm"] = None``)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from torch import nn

from nnx.extend import MissingDistributionError
from nnx.paradigms import NNPreferenceDataset, dpo_train_step_factory


def _block_nnx_lm(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "nnx.lm" or m.startswith("nnx.lm.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "nnx.lm", None)  # type: ignore[arg-type]


def test_without_nnx_lm_the_factory_raises_the_one_install_hint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _block_nnx_lm(monkeypatch)
    reference = nn.Linear(3, 3)
    with pytest.raises(MissingDistributionError, match="pip install nnx-lm") as info:
        dpo_train_step_factory(reference, pad_id=0)
    assert isinstance(info.value, ImportError) and info.value.distribution == "nnx-lm"
    assert "dpo_train_step_factory" in str(info.value)
    assert all(p.requires_grad for p in reference.parameters())


def test_without_nnx_lm_the_dataset_raises_the_one_install_hint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _block_nnx_lm(monkeypatch)
    with pytest.raises(MissingDistributionError, match="pip install nnx-lm") as info:
        NNPreferenceDataset([([1], [2], [3])], pad_id=0, vocab_size=4)
    assert "NNPreferenceDataset" in str(info.value)


def test_nnx_paradigms_imports_without_nnx_lm() -> None:
    # A fresh interpreter: re-importing nnx.paradigms here would leave a second copy.
    code = (
        "import sys\n"
        "sys.modules['nnx.lm'] = None\n"
        "import nnx.paradigms as paradigms\n"
        "assert {'NNPreferenceDataset', 'dpo_train_step_factory', 'jepa_objective',\n"
        "        'jepa_train_step_factory'} <= set(paradigms.__all__)\n"
        "assert sys.modules['nnx.lm'] is None  # nothing imported it behind our back\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
