"""The numbers §13.4 (Preprocessing) states: float64 *population* statistics, and a
constant column keeps its exact value as the mean with scale 1."""

from __future__ import annotations

import numpy as np
import torch

from nnx.preprocessing import Standardizer


def test_population_statistics_and_the_constant_column():
    df = np.array([
        [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0, 1e6, -3.0],
        [0.1] * 8 + [50.0, 60.0],
        [1, 3, 1, 3, 1, 3, 1, 3, 7, 9],
    ]).T  # ten rows of (a, b, c); rows 8 and 9 are held out
    s = Standardizer.fit(df, rows=range(8), columns=["a", "b", "c"])
    # a: mean 5, population std 2 (the sample std would be sqrt(32/7)).
    # b: constant 0.1 keeps exactly 0.1 and scale 1; an average of eight 0.1 is not 0.1.
    # c: mean 2, population std 1 (not sqrt(8/7)).
    assert s.mean == (5.0, 0.1, 2.0)
    assert s.scale == (2.0, 1.0, 1.0)
    assert sum([0.1] * 8) / 8 != 0.1
    assert s.n_rows == 8 and s.dtype == torch.float32
    out = s.transform(df)
    assert out.dtype == torch.float32
    assert out[:8].tolist() == [[-1.5, 0.0, -1.0], [-0.5, 0.0, 1.0], [-0.5, 0.0, -1.0],
                                [-0.5, 0.0, 1.0], [0.0, 0.0, -1.0], [0.0, 0.0, 1.0],
                                [1.0, 0.0, -1.0], [2.0, 0.0, 1.0]]
    # A held-out row: (-3 - 5) / 2, (60 - 0.1) / 1 rounded to float32, (9 - 2) / 1.
    assert out[9].tolist() == [-4.0, torch.tensor(59.9).item(), 7.0]
