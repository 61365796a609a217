"""Reproducible splits: plan once, save the manifest, replay it anywhere (spec §13.3).

``plan_split`` decides which rows train, validate and test from the sample ids
and their groups, times or labels alone, seeded by SHA-256 (no global RNG):

* group: every patient's rows land in one split;
* chronological: a time on a cutoff starts the later split, and the gap rows
  before each cutoff are excluded from every loader;
* stratified: every class reaches every active split;
* the saved ``split.json`` (``nnx.split/1``) reloads equal, ``NNTabularDataset``
  replays it by the id column in any row order, and a changed source file is
  refused with ``SplitError`` before any tensor exists;
* ``ExperimentManifest(splits={"main": plan})`` records the plan's digest as a
  verified identity.

    uv run python examples/split_replay.py
"""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import torch

from nnx import NNTabularDataset
from nnx.data_splits import SplitError, SplitManifest, plan_split
from nnx.provenance import ExperimentManifest, hash_file


def rows() -> pd.DataFrame:
    """60 visits of 15 patients over 60 days; the label follows age."""
    g = np.random.default_rng(0)  # a private generator: the global streams stay untouched
    age = g.integers(20, 80, size=60).astype(float)
    return pd.DataFrame({
        "row_id": [f"visit-{i:03d}" for i in range(60)],
        "patient": [f"patient-{i % 15:02d}" for i in range(60)],
        "day": np.arange(60),
        "age": age,
        "income": g.normal(50.0, 10.0, size=60).round(1),
        "label": (age > 50).astype(int),
    })


def main() -> None:
    df = rows()
    df.to_csv("rows.csv", index=False)
    source = hash_file("rows.csv")  # the same bytes on every run: the same digest

    states = (torch.get_rng_state(), random.getstate())
    plan = plan_split(df["row_id"], strategy="group", groups=df["patient"],
                      proportions=(0.7, 0.15, 0.15), seed=7, source=source)
    assert torch.equal(torch.get_rng_state(), states[0]) and random.getstate() == states[1]
    plan.save("split.json")
    print(f"group plan: {len(plan.train)} / {len(plan.val)} / {len(plan.test)} rows, "
          f"digest {plan.digest()[:16]}")

    patient = dict(zip(df["row_id"], df["patient"], strict=True))
    homes = [{patient[i] for i in ids} for ids in (plan.train, plan.val, plan.test)]
    assert not (homes[0] & homes[1] or homes[0] & homes[2] or homes[1] & homes[2])
    print("no patient spans two splits")

    loaded = SplitManifest.load("split.json")
    assert loaded == plan and loaded.digest() == plan.digest()
    shuffled = df.sample(frac=1.0, random_state=1)  # another row order, same memberships
    dataset = NNTabularDataset(df=shuffled, feature_cols=["age", "income"], target_col="label",
                               split=loaded, id_col="row_id", source_identity=source)
    print(f"replayed: train loader {sum(len(x) for x, _ in dataset.train_loader)} rows, "
          f"state split {dataset.state()['split'][:16]}")
    assert loaded.replay(shuffled["row_id"], source_identity=source,
                         groups=shuffled["patient"]) == plan

    df.loc[0, "income"] += 1.0
    df.to_csv("rows.csv", index=False)
    try:
        NNTabularDataset(df=df, feature_cols=["age", "income"], target_col="label",
                         split=loaded, id_col="row_id", source_identity=hash_file("rows.csv"))
    except SplitError as exc:
        print(f"edited source refused: {str(exc)[:40]}...")
    else:
        raise AssertionError("a changed source must be refused")

    by_time = plan_split(df["row_id"], strategy="chronological", times=df["day"],
                         cutoffs=(40, 50), gap=2)
    print(f"chronological: {len(by_time.train)} / {len(by_time.val)} / {len(by_time.test)} "
          f"rows, {len(by_time.excluded)} gap rows in no loader")
    assert by_time.excluded == ("visit-038", "visit-039", "visit-048", "visit-049")

    stratified = plan_split(df["row_id"], strategy="stratified", labels=df["label"],
                            proportions=(0.6, 0.2, 0.2), seed=3)
    label = dict(zip(df["row_id"], df["label"], strict=True))
    for ids in (stratified.train, stratified.val, stratified.test):
        assert {label[i] for i in ids} == {0, 1}
    print("stratified: both classes in every split")

    manifest = ExperimentManifest(splits={"main": loaded})
    assert manifest.splits["main"]["value"] == plan.digest()
    print(f"experiment fingerprint {manifest.fingerprint[:16]} records the split digest")


if __name__ == "__main__":
    main()
