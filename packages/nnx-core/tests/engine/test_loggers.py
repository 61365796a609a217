"""TensorBoardCallback and WandbCallback: what a run logs, read back with each tool's reader.

Real runs, real writers: each test trains a tiny FeedFwd model, then reads
the event files with TensorBoard's EventAccumulator, or the offline W&B
run's transaction log, and compares every key and value with the run's own
records. The logger tests skip cleanly where an extra is not installed.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from nnx import (
    Losses,
    MetricSpec,
    MonitorSpec,
    Nets,
    NNDataset,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
    TaskSpec,
)
from nnx.callbacks import TensorBoardCallback, WandbCallback

FIELDS = ("loss", "error", "accuracy", "f1", "recall", "precision")
CLASSIFICATION_FIELDS = ("error", "accuracy", "f1", "recall", "precision")


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ lands in a scratch directory
    return tmp_path


def _classifier_run(callbacks: list[Any], *, n_epochs: int = 3):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(48, 4, generator=g)
    y = (x[:, 0] + 0.5 * torch.randn(48, generator=g) > 0).long() + (x[:, 1] > 1).long()
    data = NNDataset(x, y, val_proportion=0.25, batch_sizes=(8, None, None), seed=0)
    model = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)),
                    params=NNModelParams(net=Nets.FEED_FWD))
    params = NNTrainParams(
        n_epochs=n_epochs, train_loader=data.train_loader, val_loader=data.val_loader,
        metrics=[MetricSpec("accuracy"), MetricSpec("nll")],
        monitor=MonitorSpec(metric="nll", min_delta=0.0), seed=0)
    return model.train(params, callbacks=callbacks, verbose=False)


def _regression_run(callbacks: list[Any]):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(40, 3, generator=g)
    y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(40, 1, generator=g)
    data = NNDataset(x, y, val_proportion=0.25, batch_sizes=(8, None, None), seed=0)
    model = NNModel(net_params=NNParams(input_dim=3, output_dim=1, hidden_dims=(8,)),
                    params=NNModelParams(net=Nets.FEED_FWD, loss=Losses.MEAN_SQUARED_ERROR,
                                         task=TaskSpec.regression(1)))
    params = NNTrainParams(n_epochs=2, train_loader=data.train_loader,
                           val_loader=data.val_loader, seed=0)
    return model.train(params, callbacks=callbacks, verbose=False)


def _expected(run) -> dict[int, dict[str, float]]:
    """Per epoch, every key a logger must report, built straight from the run's records."""
    out: dict[int, dict[str, float]] = {}
    for idp in run.epoch_records():
        keys: dict[str, float] = {}
        for prefix, edp in (("train", idp.train_edp), ("val", idp.val_edp),
                            ("train_epoch", idp.train_summary)):
            if edp is None:
                continue
            for name in FIELDS:
                if getattr(edp, name) is not None:
                    keys[f"{prefix}/{name}"] = getattr(edp, name)
            for name, value in edp.metrics.items():
                keys[f"{prefix}/metrics/{name}"] = value
            for name, value in edp.extra.items():
                keys[f"{prefix}/extra/{name}"] = value
        keys["lr"] = idp.lr  # no scheduler: the epoch-end LR is the batches' LR
        if idp.selection is not None:
            sel = idp.selection
            keys[f"monitor/{sel['split']}.{sel['metric']}"] = sel["value"]
            keys["monitor/improved"] = 1.0 if sel["improved"] else 0.0
        out[idp.epoch] = keys
    return out


def _f32(value: float) -> float:
    """TensorBoard stores simple scalars as float32."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _tensorboard_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(log_dir), size_guidance={ea.SCALARS: 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]}


# -- TensorBoard --------------------------------------------------------------------


def test_tensorboard_scalars_equal_the_run_records():
    pytest.importorskip("tensorboard")
    cb = TensorBoardCallback(log_every_n_batches=2)
    run = _classifier_run([cb])
    assert cb.path == run.path / "tensorboard"
    logged = _tensorboard_scalars(cb.path)
    expected = _expected(run)
    assert sorted(expected) == [0, 1, 2]

    epoch_tags = {tag for tag in logged if not tag.startswith("train_batch/")}
    assert epoch_tags == set(expected[0])
    # The three splits, the declared metrics beside the fields, the monitor.
    for tag in ("train/loss", "train/accuracy", "val/accuracy", "val/metrics/accuracy",
                "val/metrics/nll", "train_epoch/loss", "train_epoch/metrics/nll", "lr",
                "monitor/val.nll", "monitor/improved"):
        assert tag in epoch_tags, tag
    for tag in epoch_tags:
        assert logged[tag] == [(e, _f32(expected[e][tag])) for e in (0, 1, 2)], tag
    improved = [value for _, value in logged["monitor/improved"]]
    assert improved == [float(r.selection["improved"]) for r in run.epoch_records()]
    assert improved[0] == 1.0  # the first finite value always improves

    # Every 2nd batch of each epoch, at its run-wide microbatch index.
    batches = [idp for idp in run.idps if idp.batch_idx % 2 == 0]
    assert {idp.batch_idx for idp in run.idps} == {0, 1, 2, 3, 4}  # 36 rows, batches of 8
    assert logged["train_batch/loss"] == [(i.iter_idx, _f32(i.train_edp.loss)) for i in batches]
    assert logged["train_batch/lr"] == [(i.iter_idx, _f32(i.lr)) for i in batches]
    assert {t for t in logged if t.startswith("train_batch/")} == {
        f"train_batch/{name}" for name in (*FIELDS, "lr")}


def test_tensorboard_regression_run_logs_no_classification_field(tmp_path):
    pytest.importorskip("tensorboard")
    cb = TensorBoardCallback(log_dir=tmp_path / "tb")
    run = _regression_run([cb])
    assert cb.path == tmp_path / "tb"
    logged = _tensorboard_scalars(cb.path)
    expected = _expected(run)
    assert set(logged) == set(expected[0])
    assert {"train/loss", "val/loss", "train/metrics/mse", "val/metrics/mse",
            "val/metrics/mae", "lr"} <= set(logged)
    for tag in logged:
        leaf = tag.rsplit("/", 1)[-1]
        assert leaf not in CLASSIFICATION_FIELDS, tag
        assert not tag.startswith(("monitor/", "train_epoch/")), tag  # none declared
        assert logged[tag] == [(e, _f32(expected[e][tag])) for e in (0, 1)], tag


def test_tensorboard_arguments_are_checked():
    pytest.importorskip("tensorboard")
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="log_every_n_batches"):
            TensorBoardCallback(log_every_n_batches=bad)
    with pytest.raises(TypeError, match="log_dir"):
        TensorBoardCallback(log_dir=3)


# -- Weights & Biases -------------------------------------------------------------------


def _wandb_records(path: Path) -> list[Any]:
    """The records of a ``.wandb`` transaction log, decoded with W&B's own protobuf schema.

    The file is W&B's LevelDB-style log: a 7-byte header (``:W&B``, magic, version),
    then 32 KiB blocks of chunks, each a 7-byte header (CRC32C, length, type:
    1 full, 2 first, 3 middle, 4 last) and its payload.
    """
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, pending, pos = [], b"", 7
    while pos + 7 <= len(data):
        room = 32768 - pos % 32768
        if room < 7:  # a block's tail too short for a chunk header is padding
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:  # zero padding to the end of the block
            pos += room
            continue
        if pos + 7 + length > len(data):
            break  # a chunk still being written: the caller polls again
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def _finished_wandb_log(wandb_dir: Path, timeout: float = 30.0) -> list[Any]:
    """The offline run's records once its exit record is on disk.

    W&B's service process writes the log asynchronously: ``finish()`` can return
    while the file still holds only its header, so wait for the exit record.
    """
    from google.protobuf.message import DecodeError

    deadline = time.monotonic() + timeout
    while True:
        logs = list(wandb_dir.glob("offline-run-*/run-*.wandb"))
        assert len(logs) <= 1, logs
        try:
            records = _wandb_records(logs[0]) if logs else []
        except DecodeError:  # read mid-write (a loaded machine): poll again
            records = []
        if any(r.WhichOneof("record_type") == "exit" for r in records):
            return records
        if time.monotonic() > deadline:
            raise AssertionError(f"no finished W&B log under {wandb_dir} after {timeout} s")
        time.sleep(0.05)


def test_wandb_offline_history_equals_the_run_records(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    for name in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    cb = WandbCallback(mode="offline", tags=["nnx-test"])
    run = _classifier_run([cb])
    assert cb.wandb_run is None  # finished at train end

    records = _finished_wandb_log(run.path / "wandb")
    (info,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert info.display_name == run.id and info.project == "nnx"
    assert list(info.tags) == ["nnx-test"]
    config = {item.key: json.loads(item.value_json) for item in info.config.update}
    assert {k: config[k] for k in run.state()} == json.loads(json.dumps(run.state()))

    history: dict[int, dict[str, float]] = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            row = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json)
                   for i in r.history.item}
            history[r.history.step.num] = {k: v for k, v in row.items()
                                           if not k.startswith("_")}
    assert history == _expected(run)  # every key and value, exact (W&B keeps doubles)
    assert history[0]["monitor/improved"] == 1.0
    assert "val/metrics/accuracy" in history[0] and "val/accuracy" in history[0]


# -- without the extras ---------------------------------------------------------------


@pytest.mark.parametrize(("make", "module", "extra"), [
    (TensorBoardCallback, "tensorboard", "tensorboard"),
    (WandbCallback, "wandb", "wandb"),
])
def test_a_missing_extra_fails_at_construction(make, module, extra, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # what an uninstalled package looks like
    with pytest.raises(ImportError, match=rf'pip install "nnx-core\[{extra}\]"'):
        make()


def test_importing_the_callbacks_imports_neither_extra():
    code = ("import sys, nnx.callbacks, nnx.callbacks.tensorboard, nnx.callbacks.wandb\n"
            "loaded = [m for m in sys.modules if m.split('.')[0] in ('tensorboard', 'wandb')\n"
            "          or m.startswith('torch.utils.tensorboard')]\n"
            "assert not loaded, loaded\n")
    subprocess.run([sys.executable, "-c", code], check=True)
