"""§13.3 (reproducible splits): the largest-remainder cut with its carry, worked by hand.

The spec's own example plans with proportions (0.7, 0.15, 0.15); these are the
per-class row counts that rule gives, derived step by step in the comments.
"""

from __future__ import annotations

from nnx.data_splits._proportions import check_proportions
from nnx.data_splits._stratified import class_counts


def _counts(sizes, proportions):
    return class_counts(sizes, check_proportions(proportions)[1])


def test_the_carry_at_0_7_0_15_0_15():
    # class 1, 7 rows: asks 4.9 / 1.05 / 1.05 -> floors 4/1/1, one left: train (.9)
    #   -> 5/1/1, carry -0.1 / +0.05 / +0.05
    # class 2, 5 rows: asks 3.4 / 0.8 / 0.8 -> floors 3/0/0, two left: val, test (.8 > .4)
    #   -> 3/1/1, carry +0.4 / -0.2 / -0.2
    # class 3, 9 rows: asks 6.7 / 1.15 / 1.15 -> floors 6/1/1, one left: train (.7) -> 7/1/1
    assert _counts([7, 5, 9], (0.7, 0.15, 0.15)) == [[5, 1, 1], [3, 1, 1], [7, 1, 1]]
    # totals 15 / 3 / 3 against 14.7 / 3.15 / 3.15: within one row per split


def test_the_carry_at_0_6_0_2_0_2():
    # 10 rows: 6/2/2 exactly; 6 rows: asks 3.6/1.2/1.2 -> 3/1/1 + train -> 4/1/1,
    # carry -0.4/+0.2/+0.2; 4 rows: asks 2.0/1.0/1.0 -> 2/1/1. Totals 12/4/4 of 20.
    assert _counts([10, 6, 4], (0.6, 0.2, 0.2)) == [[6, 2, 2], [4, 1, 1], [2, 1, 1]]


def test_the_one_row_minimum_comes_after_the_carry():
    # 3 rows at 0.8/0.1/0.1: asks 2.4/0.3/0.3 -> 2/0/0 + train -> 3/0/0; carry -0.6/.3/.3.
    # The minimum then moves a row each to val and test: 1/1/1 (the carry is unchanged).
    # Next 3 rows: asks 1.8/0.6/0.6 -> 1/0/0 + train (.8) + val (.6, ties to the earlier
    # split) -> 2/1/0; the minimum -> 1/1/1.
    assert _counts([3, 3], (0.8, 0.1, 0.1)) == [[1, 1, 1], [1, 1, 1]]
    # 20 rows after the first class ask 16 - 0.6 / 2 + 0.3 / 2 + 0.3 = 15.4 / 2.3 / 2.3
    # -> 15/2/2 + train -> 16/2/2. Had the minimum fed the carry (1.4 / -0.7 / -0.7) they
    # would ask 17.4 / 1.3 / 1.3 -> 18/1/1: the minimum never skews another class.
    assert _counts([3, 20], (0.8, 0.1, 0.1)) == [[1, 1, 1], [16, 2, 2]]
