"""The specs moved down into the configuration layer keep their public paths (issue 14).

That the layer imports only itself and the foundation is the layers contract
(tests/test_layers.py)."""

from __future__ import annotations


def test_the_moved_specs_and_folded_builders_keep_their_public_paths():
    import nnx.metrics
    import nnx.monitors
    import nnx.params
    import nnx.tasks
    from nnx.params.metric import MetricSpec
    from nnx.params.monitor import MonitorSpec, improved
    from nnx.params.optim import NNOptimParamsBuilder
    from nnx.params.scheduler import NNSchedulerParamsBuilder
    from nnx.params.task import TaskSpec
    from nnx.params.trainer import NNTrainerParamsBuilder

    assert nnx.MonitorSpec is nnx.monitors.MonitorSpec is MonitorSpec
    assert nnx.monitors.improved is improved
    assert nnx.MetricSpec is nnx.metrics.MetricSpec is MetricSpec
    assert nnx.TaskSpec is nnx.tasks.TaskSpec is TaskSpec
    assert nnx.NNOptimParamsBuilder is nnx.params.NNOptimParamsBuilder is NNOptimParamsBuilder
    assert nnx.NNSchedulerParamsBuilder is NNSchedulerParamsBuilder
    assert nnx.NNTrainerParamsBuilder is nnx.params.NNTrainerParamsBuilder \
        is NNTrainerParamsBuilder
    assert isinstance(nnx.NNOptimParams.builder(), NNOptimParamsBuilder)
    assert isinstance(nnx.NNSchedulerParams.builder(), NNSchedulerParamsBuilder)
    assert isinstance(nnx.NNTrainerParams.builder(), NNTrainerParamsBuilder)
