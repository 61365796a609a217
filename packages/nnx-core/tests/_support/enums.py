"""Helpers shared by the tests split out of configuration/test_enums.py."""

from __future__ import annotations


def lrs_over(scheduler, optimizer, steps):
    seen = []
    for _ in range(steps):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return seen
