"""nnx.preprocessing needs no pandas: tensors, arrays and rows fit, transform and reload."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from nnx.preprocessing import PreprocessingError, Standardizer


def test_fit_transform_and_reload_work_with_pandas_unimportable(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now fails
    data = np.random.default_rng(2).normal(3.0, 2.0, size=(20, 3))
    s = Standardizer.fit(torch.from_numpy(data), rows=range(15))
    assert s.columns == [0, 1, 2]
    s.save(tmp_path / "s.json")
    again = Standardizer.load(tmp_path / "s.json")
    assert again == s and torch.equal(again(data[3]), s.transform(data)[3])
    with pytest.raises(PreprocessingError, match="3 columns"):
        s.transform(data[:, :2])


def test_importing_nnx_preprocessing_loads_no_pandas():
    code = ("import sys, nnx.preprocessing, nnx.datasets; "
            "assert 'pandas' not in sys.modules, 'pandas was imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
