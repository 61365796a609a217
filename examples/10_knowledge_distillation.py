"""Knowledge distillation: a wide teacher into a small student (spec §10.1, §6.5).

``objective_mode`` trains a teacher, then distills it into a student with
``kd_objective(teacher, alpha=0.5, temperature=4.0)`` passed as
``student.train(..., objective=...)``. The loss is
α · KL(softmax(t/T) ‖ softmax(s/T)) · T² + (1 − α) · L_hard, and the shared
update engine gives it exact accumulation (here two microbatches of uneven
size per window), clipping and the non-finite policy. The teacher is frozen
when the run starts and its weights never move.

``step_mode`` distills the same teacher with the step-function form,
``kd_train_step_factory(teacher, alpha=0.5, temperature=4.0)`` from nnx-paradigms
passed as ``train_step_fn=``: the same loss, finished by ``finalize_step`` in full
precision, one optimizer step per batch (no accumulation).

The teacher is trained once and shared by both modes; every run is written under a
temporary directory, so the example runs again in the same place unchanged.

    uv run python examples/10_knowledge_distillation.py
"""

from __future__ import annotations

import tempfile

import torch

from nnx import (
    NNDataset,
    NNModel,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    kd_objective,
    kd_train_step_factory,
    set_seed,
)
from nnx.datasets import load_penguins

TEACHER_EPOCHS, STUDENT_EPOCHS = 5, 12


def penguins() -> NNDataset:
    x, y, _, _ = load_penguins()
    x = (x - x.mean(0)) / x.std(0)  # standardised features
    return NNDataset(x, y, val_proportion=0.25, batch_sizes=(24, None, None), seed=0)


def train_teacher(data: NNDataset, root: str) -> NNModel:
    """The pretrained, larger net."""
    set_seed(0)
    teacher = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(32, 32)))
    teacher.train(NNTrainParams(n_epochs=TEACHER_EPOCHS, train_loader=data.train_loader,
                                val_loader=data.val_loader, seed=0,
                                optim=NNOptimParams.builder().adamw(max_lr=1e-2).build()),
                  verbose=False, root=root)
    return teacher


def report(teacher: NNModel, student: NNModel, data: NNDataset, run_id: str, epochs: int,
           how: str) -> float:
    teacher_error = teacher.evaluate(data.val_loader).error
    student_error = student.evaluate(data.val_loader).error
    teacher_size = sum(p.numel() for p in teacher.net.parameters())
    student_size = sum(p.numel() for p in student.net.parameters())
    print(f"[{how}] teacher: {teacher_size} parameters, val error {teacher_error:.3f}")
    print(f"[{how}] student: {student_size} parameters, val error {student_error:.3f} "
          f"(distilled in run {run_id[:8]}, {epochs} epochs)")
    return float(student_error)


def objective_mode(data: NNDataset, teacher: NNModel, root: str) -> None:
    frozen = {k: v.clone() for k, v in teacher.net.state_dict().items()}

    set_seed(1)
    student = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)))
    optim = (NNOptimParams.builder().adamw(max_lr=1e-2).grad_clip(1.0)
             .accumulate_grad(2).build())
    run = student.train(NNTrainParams(n_epochs=STUDENT_EPOCHS, train_loader=data.train_loader,
                                      val_loader=data.val_loader, seed=1, optim=optim),
                        objective=kd_objective(teacher, alpha=0.5, temperature=4.0),
                        verbose=False, root=root)

    assert all(torch.equal(frozen[k], v) for k, v in teacher.net.state_dict().items()), \
        "the teacher's weights moved"
    assert all(not p.requires_grad for p in teacher.net.parameters())
    error = report(teacher, student, data, run.id, len(run.epoch_records()), "objective")
    assert error <= 0.1, error  # penguins are nearly separable


def step_mode(data: NNDataset, teacher: NNModel, root: str) -> None:
    frozen = {k: v.clone() for k, v in teacher.net.state_dict().items()}
    step = kd_train_step_factory(teacher, alpha=0.5, temperature=4.0)  # freezes it now

    set_seed(1)
    student = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)))
    optim = NNOptimParams.builder().adamw(max_lr=1e-2).grad_clip(1.0).build()
    run = student.train(NNTrainParams(n_epochs=STUDENT_EPOCHS, train_loader=data.train_loader,
                                      val_loader=data.val_loader, seed=1, optim=optim),
                        train_step_fn=step, verbose=False, root=root)

    assert all(torch.equal(frozen[k], v) for k, v in teacher.net.state_dict().items()), \
        "the teacher's weights moved"
    # The step's records: the combined loss, and the student's top-1 error.
    last = run.idps[-1].train_edp
    assert last is not None and last.error is not None and "distillation" in last.extra
    error = report(teacher, student, data, run.id, len(run.epoch_records()), "step")
    assert error <= 0.1, error


def main() -> None:
    data = penguins()
    with tempfile.TemporaryDirectory() as root:
        teacher = train_teacher(data, root)
        objective_mode(data, teacher, root)
        step_mode(data, teacher, root)


if __name__ == "__main__":
    main()
