"""NNModel: a net (built-in, registered or wrapped) with its loss, device, precision and task."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from nnx._contracts.batch_adapters import BatchAdapter, ModelInputs, default_batch_adapter
from nnx._contracts.precision import ResolvedPrecision, resolve_precision
from nnx._engine.evaluation import evaluate_loader
from nnx._engine.schedule import build_scheduler
from nnx._engine.training import train_model
from nnx._foundation.records import NNEvaluationDataPoint
from nnx._persistence.checkpoint import NNCheckpoint
from nnx._persistence.run import DEFAULT_ROOT, NNRun
from nnx._surface.live_changes import recording_live_changes
from nnx._surface.model_inference import (
    dtype_hint,
    logits_of,
    on_device,
    predict_classes,
    predict_probabilities,
)
from nnx.enums.precision import Precision
from nnx.models.construct import build_net
from nnx.models.reload_blockers import refuse_reload_blockers
from nnx.params._loaders import check_loader
from nnx.params.compile import CompileSpec
from nnx.params.descriptors import RuntimeModule
from nnx.params.model import NNModelParams
from nnx.params.net import NNParams
from nnx.params.scheduler import NNSchedulerParams
from nnx.params.train import NNTrainParams
from nnx.tasks.adapters import TaskAdapter
from nnx.tasks.protocol import Task, refuse_default_path
from nnx.tasks.runtime import TaskRuntime, check_task_object, resolve_task
from nnx.transforms import TransformRecipe, apply_transform

if TYPE_CHECKING:
    from nnx._contracts.trainable import TrainableModel
    from nnx._engine.prediction import PredictionResult, PredictResult, ProbabilitySpec
    from nnx._engine.prediction_stream import PredictionStream

# Fine-tuning, ONNX export, the Hub, streaming prediction and rebuilding from saved
# weights are imported by the methods that use them (issue 38): a fit loads none of them.

__all__ = ["NNModel"]


class NNModel:
    """A model: ``NNModel(net_params=NNParams(...), params=NNModelParams(...))``.

    ``params.net`` may also be a registered :class:`~nnx.models.ModelSpec`
    (built through its factory, no ``net_params``), or pass ``module=`` to wrap
    an ``nn.Module`` instance as is (``model.net is module``; ``params.net``
    becomes its :class:`~nnx.models.RuntimeModule`; with ``Devices.AUTO`` the
    module stays on its own device). ``batch_adapter`` (runtime-only) says how
    such a module sees batches; by default a module's own ``unpack_batch``,
    else :class:`~nnx._contracts.batch_adapters.PositionalInputs`. ``net`` is a plain
    ``torch.nn.Module`` (built-in nets return raw logits); ``train`` runs the
    supervised loop and returns the :class:`NNRun`. ``transforms`` holds the
    topology-transform recipes materialized on ``net``, in order (§4.2).

    ``task`` (runtime-only, like ``batch_adapter``) is any object implementing
    :class:`nnx.tasks.Task`: ``train``, ``evaluate`` and ``predict`` then use it
    through the protocol's members, and its ``identity()`` enters the run id. A
    model declares its task once: a TaskSpec on ``params.task`` and a task object
    together raise ``ValueError`` (docs/extending.md, "The Task protocol").
    """

    # The compiled forward of a train(compile=...) fit, set for that fit only; never net.
    _fit_forward: Callable[..., Any] | None = None

    def __init__(self, net_params: NNParams | None = None,
                 params: NNModelParams | None = None, *, module: nn.Module | None = None,
                 batch_adapter: BatchAdapter | None = None, task: Task | None = None) -> None:
        params = NNModelParams() if params is None else params
        if not isinstance(params, NNModelParams):
            raise TypeError(f"params must be an NNModelParams; got {type(params).__name__}")
        if batch_adapter is not None and not isinstance(batch_adapter, BatchAdapter):
            raise TypeError(f"batch_adapter must be a BatchAdapter; got "
                            f"{type(batch_adapter).__name__}")
        check_task_object(task, params.task)  # before the net is built
        net, params, device = build_net(net_params, params, module)
        self.params = params
        self.net_params = net_params  # None for a registered or wrapped module
        self.device = device
        self.net: nn.Module = net
        self.batch_adapter = batch_adapter or default_batch_adapter(net)
        self.loss_fn: nn.Module = params.loss().to(self.device)
        self._task = task
        self._runtime = resolve_task(task, params.task, self.loss_fn)
        # The loss it was resolved for. Named as before TaskRuntime: model_fingerprint
        # scans a model's attributes, so a loss with buffers keeps its fingerprint.
        self._adapter_loss = self.loss_fn
        self.transforms: tuple[TransformRecipe, ...] = ()

    @property
    def task(self) -> Task | None:
        """The task object the model was given (None: the TaskSpec's, or the default)."""
        return self._task

    @task.setter
    def task(self, task: Task | None) -> None:
        check_task_object(task, self.params.task)
        self._runtime = resolve_task(task, self.params.task, self.loss_fn)
        self._adapter_loss = self.loss_fn
        self._task = task

    @property
    def task_runtime(self) -> TaskRuntime:
        """The model's task as the engine uses it, for the live ``loss_fn``: the object
        answering the Task protocol and, beside it, the per-batch machinery
        (:func:`nnx.tasks.resolve_task`). The loss object's class weights,
        ``ignore_index`` and ``reduction`` stay authoritative (spec §3.1, §6.3):
        assigning another loss to ``loss_fn`` rebuilds both for it, checking that it
        suits the task.
        """
        if self._adapter_loss is not self.loss_fn:
            self._runtime = resolve_task(self._task, self.params.task, self.loss_fn)
            self._adapter_loss = self.loss_fn
        return self._runtime

    @property
    def task_adapter(self) -> TaskAdapter:
        """The task's per-batch machinery (§6.3): validation, loss parts, records,
        accumulators, decoding. Without a task object, the declared TaskSpec's adapter
        (or the implicit default); with one, the default adapter of the loss, unless
        the object is an adapter itself."""
        return self.task_runtime.batch_ops

    # -- batches ----------------------------------------------------------------------
    def split_batch(self, batch: Any) -> tuple[ModelInputs, torch.Tensor | None]:
        """``(inputs, target)`` on the model's device, through the batch adapter.

        ``inputs`` is a :class:`~nnx._contracts.batch_adapters.ModelInputs`: the positional
        inputs as a tuple, with the keyword inputs in ``inputs.kwargs``.
        """
        args, kwargs, target = self.batch_adapter.split(batch)
        device = self.device
        inputs = ModelInputs(tuple(on_device(x, device) for x in args),
                             {k: on_device(v, device) for k, v in kwargs.items()}
                             if kwargs else None)
        return inputs, None if target is None else on_device(target, device)

    def forward_raw(self, inputs: Sequence[Any], *,
                    net: nn.Module | None = None) -> torch.Tensor:
        """``net(*inputs, **inputs.kwargs)``, its output tensor read by the batch adapter.

        ``net`` None calls ``self.net`` (during a ``compile=`` fit, the fit's compiled
        wrapper of it); a training step context passes the DDP wrapper
        of ``self.net`` (``ctx.train_net``), which ``self.net`` itself never becomes, so
        its parameter names never carry ``module.``.
        """
        kwargs = inputs.kwargs if isinstance(inputs, ModelInputs) else {}
        forward: Callable[..., Any] = net if net is not None else (
            # during a compiled fit, its wrapper of self.net (nnx._engine.compilation)
            self.net if self._fit_forward is None else self._fit_forward)
        try:
            raw = forward(*inputs, **kwargs)
        except RuntimeError as exc:
            hint = dtype_hint(exc, inputs, kwargs, self.net)
            if hint is None:
                raise
            raise RuntimeError(hint) from exc
        return self.batch_adapter.output(raw)

    def inference_precision(self) -> ResolvedPrecision:
        """Inference runs in an explicit policy only; the legacy flag never governs it."""
        if self.params.precision is None:
            return ResolvedPrecision(Precision.FP32, self.device.type)
        return resolve_precision(self.params, self.device)

    # -- training ---------------------------------------------------------------------
    def train(self, params: NNTrainParams, *, train_step_fn: Callable[..., Any] | None = None,
              objective: Any = None, eval_step_fn: Callable[..., Any] | None = None,
              callbacks: Iterable[Any] | None = None,
              salt: str | None = None, verbose: bool | None = None,
              root: str | os.PathLike[str] = DEFAULT_ROOT,
              components: Iterable[Any] | None = None, history: Any = None,
              provenance: Any = None, distributed: Any = None,
              compile: CompileSpec | None = None) -> NNRun:
        """Train on ``params.train_loader``; writes ``runs/<id>/`` and returns the run.

        ``compile=nnx.compilation.CompileSpec(...)`` runs the default step's forward and
        the fit's validation through ``torch.compile`` (docs/compile.md); ``net`` stays
        the eager module, and the run id is the same with or without it.

        ``distributed=nnx.distributed.DDP(...)`` trains on every rank of a torchrun
        launch; rank 0 alone writes the run (docs/distributed.md).

        The update owner is the default supervised step, a ``train_step_fn``, or an
        ``objective`` run by the shared update engine (§6.5), never two of them.
        ``callbacks`` / ``components`` None mean none. ``verbose=False`` prints nothing
        (no progress bar, no ``Run saved to`` line).

        A net changed in place since its params built it (``apply_lora_to(model.net,
        ...)``) is recorded as the transform recipes a registered op recognises, so the
        run id tells the variants apart and ``from_checkpoint`` rebuilds them; any other
        change raises :class:`~nnx.transforms.LiveTopologyError` before the run is
        reserved, unless ``salt`` names the variant (spec §11.1, docs/peft.md).

        A built-in or registered net still carrying pruning masks or a weight_norm /
        spectral_norm parametrization raises
        :class:`~nnx.models.reload_blockers.UnreloadableNetError` first (spec §16).
        """
        if not isinstance(self.params.net, RuntimeModule):
            refuse_reload_blockers(self.net, what=f"{type(self).__name__}.train")
        with recording_live_changes(self, salt=salt, what=f"{type(self).__name__}.train"):
            return train_model(self, params, train_step_fn=train_step_fn, objective=objective,
                               eval_step_fn=eval_step_fn, callbacks=list(callbacks or ()),
                               salt=salt, verbose=verbose, root=os.fspath(root),
                               components=list(components or ()), history=history,
                               provenance=provenance, distributed=distributed,
                               compile=compile)

    def _build_scheduler(self, optimizer: torch.optim.Optimizer, params: NNSchedulerParams,
                         n_epochs: int, *, updates_per_epoch: int | None = None,
                         plateau_rule: tuple[str, float, str] | None = None) -> Any:
        """The torch scheduler a training run steps (spec §2.5); override to build another.

        Called once per schedule by NNModel.train and Trainer.train, before any run is
        reserved, with the optimizer, the schedule's NNSchedulerParams and the session's
        epochs. ``updates_per_epoch`` is the planned updates per epoch (None when unknown)
        and ``plateau_rule`` the (mode, threshold, threshold_mode) a named monitor sets
        for ReduceLROnPlateau. NNx still steps what this returns on ``params.clock`` and
        checkpoints its ``state_dict()``; on the ``"optimizer_update"`` clock it refuses
        a ReduceLROnPlateau and a scheduler without a ``last_epoch`` position (torch's
        ChainedScheduler, for one).
        """
        return build_scheduler(optimizer, params, n_epochs, updates_per_epoch=updates_per_epoch,
                               plateau_rule=plateau_rule)

    # -- inference --------------------------------------------------------------------
    def _logits(self, data: Any) -> torch.Tensor:
        """The float logits of everything ``predict`` was given (a subclass may prepare
        ``data`` first, as PreprocessedNNModel does)."""
        return logits_of(self, data)

    def predict(self, data: Any) -> PredictResult:
        """Raw logits and the decoded classes (the task's decoding when declared)."""
        return predict_classes(self, data)

    def predict_proba(self, data: Any, spec: ProbabilitySpec | None = None) -> PredictionResult:
        """Probabilities under ``spec`` (or the declared task's) with the same logits."""
        return predict_probabilities(self, data, spec)

    def iter_predict(self, loader: Any, spec: ProbabilitySpec | None = None,
                     rich: bool = False) -> PredictionStream:
        """``predict()`` one batch at a time, as a context-managed stream (spec §21).

        Each batch is a :class:`~nnx.streaming.PredictionBatch` (logits, classes,
        sample_ids), or with ``spec`` / ``rich=True`` the PredictionResult that
        ``predict_proba()`` would build for it. Use it once, in a ``with`` block.
        """
        from nnx._engine.prediction_stream import open_prediction_stream  # on first use

        return open_prediction_stream(self, loader, spec, rich)

    def evaluate(self, loader: Any, metrics: Sequence[Any] = (),
                 extra_metrics: Mapping[str, Callable[..., Any]] | None = None
                 ) -> NNEvaluationDataPoint:
        """The whole loader's record: loss and metrics over every valid sample.

        The loss is the loader's summed numerators over its summed denominators, never a
        mean of batch means; a sum-reduction loss stays the loader's total (§21). A loader
        that yields no batch raises ValueError: there is nothing to score.
        """
        check_loader("evaluate", loader, training=False)
        refuse_default_path(self.task_runtime.task, "evaluate")
        return evaluate_loader(self, loader, metrics, extra_metrics)

    # -- fine-tuning ------------------------------------------------------------------
    def freeze(self, *patterns: str) -> list[str]:
        from nnx._engine import finetune  # on first use

        return finetune.freeze(self.net, *patterns)

    def unfreeze(self, *patterns: str) -> list[str]:
        from nnx._engine import finetune  # on first use

        return finetune.unfreeze(self.net, *patterns)

    def apply_transform(self, recipe: TransformRecipe) -> None:
        """Materialize a topology-transform recipe on ``net`` and record it (§4.2).

        The recipe joins the run id of later ``train`` calls and every
        checkpoint, and ``from_checkpoint`` replays it. A wrapped runtime module
        is refused (MissingModelFactoryError); any refusal leaves ``net`` as it was.
        """
        self.transforms = apply_transform(self.net, recipe, base=self.params.net,
                                          applied=self.transforms)

    def export_state_dict(self, path: str | os.PathLike[str]) -> Path:
        """Save ``net.state_dict()`` alone, for consumers that do not use NNx."""
        from nnx._engine import finetune  # on first use

        return finetune.export_state_dict(self.net, path)

    def to_onnx(self, path: str | os.PathLike[str], example_input: Any, *,
                opset_version: int | None = None, dynamic_batch: bool = True,
                input_names: Sequence[str] | None = None,
                output_names: Sequence[str] | None = None) -> Path:
        """Export ``net`` to an ONNX file traced on ``example_input`` (the ``onnx`` extra).

        Any module whose forward takes positional tensors and returns one tensor exports
        (built-in, registered or wrapped). ``example_input`` is a tensor or a tuple of
        them; a mapping (a keyword-input module) is refused (ValueError) before anything
        is written: wrap such a module in one with a positional forward. The batch axis
        stays dynamic unless ``dynamic_batch=False``. Every submodule's train / eval mode
        is restored, even when the export raises, and the file is written atomically.
        Returns the written path (docs/onnx.md).
        """
        from nnx._engine.onnx_export import export_onnx  # on first use

        return export_onnx(self.net, example_input, path, device=self.device,
                           opset_version=opset_version, dynamic_batch=dynamic_batch,
                           input_names=input_names, output_names=output_names)

    # -- Hub ---------------------------------------------------------------------------
    def save_pretrained(self, save_directory: str | os.PathLike[str], *,
                        repo_id: str | None = None, push_to_hub: bool = False,
                        **push_to_hub_kwargs: Any) -> str | None:
        """Write ``config.json`` and ``model.safetensors`` into ``save_directory``.

        The layout of huggingface-hub's ``ModelHubMixin`` (docs/hub.md): the config
        holds the model params (net descriptor, loss, task spec), the built-in net's
        params and the transform recipes; nnx-core alone writes and reads it.
        ``push_to_hub=True`` then uploads it to ``repo_id`` (the ``hub`` extra;
        ``push_to_hub_kwargs`` go to :meth:`push_to_hub`) and returns the commit URL.
        A runtime module is refused (MissingModelFactoryError) before any directory or
        file exists: no factory could rebuild it from the files.
        """
        from nnx._surface.hub import save_pretrained  # on first use

        return save_pretrained(self, save_directory, repo_id=repo_id, push=push_to_hub,
                               push_kwargs=push_to_hub_kwargs)

    def push_to_hub(self, repo_id: str, **kwargs: Any) -> str:
        """Save into a temporary directory and upload it to the Hub repo ``repo_id`` as
        one commit (the ``hub`` extra); returns the commit URL. ``kwargs``:
        ``commit_message``, ``private``, ``token``, ``branch``, ``create_pr``,
        ``allow_patterns``, ``ignore_patterns``, ``delete_patterns``."""
        from nnx._surface.hub import push_to_hub  # on first use

        return push_to_hub(self, repo_id, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike[str], *,
                        device: Any = None, batch_adapter: BatchAdapter | None = None,
                        task: Task | None = None, **hub_kwargs: Any) -> NNModel:
        """The model a :meth:`save_pretrained` directory or Hub repo holds, as ``cls``.

        A local directory needs nnx-core alone; a repo id needs the ``hub`` extra and
        takes ``revision``, ``cache_dir``, ``force_download``, ``local_files_only``,
        ``token`` and ``proxies`` (``huggingface_hub.hf_hub_download``'s). Only
        ``config.json`` and ``model.safetensors`` are read, never a pickle. The net is
        rebuilt from the config (a registered factory through the registry, the
        transform recipes replayed) and its parameter names and shapes compared with
        the saved tensors before any weight is loaded (ValueError on a mismatch); the
        load is strict. ``device`` overrides the saved ``NNModelParams.device``;
        ``batch_adapter`` and ``task`` are runtime-only, as for :meth:`from_checkpoint`.
        """
        from nnx._surface.hub import load_pretrained  # on first use

        return cast(NNModel, load_pretrained(cls, pretrained_model_name_or_path, device=device,
                                             batch_adapter=batch_adapter, task=task,
                                             hub_kwargs=hub_kwargs, init={}))

    # -- reloading --------------------------------------------------------------------
    @classmethod
    def from_checkpoint(cls, checkpoint: NNCheckpoint | str | os.PathLike[str],
                        map_location: Any = "cpu", *, module: nn.Module | None = None,
                        batch_adapter: BatchAdapter | None = None, task: Task | None = None
                        ) -> NNModel:
        """Rebuild the model a checkpoint was written from and load its weights.

        A registered model is rebuilt through its factory and a runtime module
        needs ``module=`` (a fresh instance of the same topology); both are
        checked against the saved parameter names and shapes before any weight
        is loaded (ValueError on a mismatch). A built-in or registered net is first
        built on the meta device and compared there, so a checkpoint recording another
        net's configuration (its ``hidden_dims``, a factory's ``width``) is refused
        (ValueError naming the checkpoint and the first differing tensors) before that
        net's memory is allocated. A
        checkpoint read from a path is verified against its manifest
        (:meth:`NNCheckpoint.from_file`). The checkpoint's transform recipes
        are replayed on the rebuilt base first; one this process cannot replay
        raises :class:`~nnx.transforms.TransformCompatibilityError` before any
        weight is loaded. ``task`` is runtime-only, as ``batch_adapter``: a checkpoint
        holds no task object, so pass the one the model was trained with.
        """
        from nnx._surface.model_rebuild import load_checkpoint_model  # on first use

        return cast(NNModel, load_checkpoint_model(
            cls, checkpoint, map_location, module=module, batch_adapter=batch_adapter,
            task=task))

    @classmethod
    def _rebuild(cls, state_dict: Mapping[str, torch.Tensor],
                 net_state: Mapping[str, Any] | None, params: NNModelParams,
                 recipes: tuple[TransformRecipe, ...], replay: Callable[[nn.Module], object],
                 what: str, *, module: nn.Module | None, batch_adapter: BatchAdapter | None,
                 task: Task | None, **init: Any) -> NNModel:
        """The model saved weights describe (a checkpoint's, a pretrained directory's),
        recipes replayed and checked against the weights' names and shapes
        (WeightsMismatchError), nothing loaded yet. ``state_dict`` may hold meta tensors:
        only names and shapes are read. ``init``: a subclass's own constructor arguments."""
        from nnx._surface.model_rebuild import rebuild_model  # on first use

        return cast(NNModel, rebuild_model(cls, state_dict, net_state, params, recipes, replay,
                                           what, module=module, batch_adapter=batch_adapter,
                                           task=task, **init))

if TYPE_CHECKING:
    def _trainable(model: NNModel) -> TrainableModel:
        """Never called: mypy proves here that NNModel satisfies the engine's protocol."""
        return model
