"""The listing summary of one epoch commit (:mod:`nnx._persistence.run_summary`), from
what the commit holds in memory: the net, the run's tags and, when this commit saved
BEST, the record it saved. Called once at the end of the commit, after LAST, BEST and
runs/best are published, and after the final LAST refresh."""

from __future__ import annotations

from typing import Any

from nnx._foundation.catalog import distribution_for
from nnx._foundation.records import NNIterationDataPoint
from nnx._persistence.add_on_run import best_score
from nnx._persistence.run import NNRun
from nnx._persistence.run_render import score_label
from nnx._persistence.run_summary import write_summary
from nnx.enums.nets import Nets

__all__ = ["net_label", "summarize_commit"]


def net_label(run: NNRun) -> tuple[str, str | None]:
    """(the net as ``nnx runs list`` shows it, the distribution that provides it)."""
    net = run.model_params.net
    if isinstance(net, Nets):
        return net.name, distribution_for("net", net.name)
    label = getattr(net, "label", None)  # a registered factory: id@vN
    if label:
        return str(label), distribution_for("model_factory", str(label))
    return str(getattr(net, "module", "module")).rsplit(".", 1)[-1], None


def summarize_commit(run: NNRun, epoch: int, idp: NNIterationDataPoint, *,
                     named_monitor: bool, monitor_value: float | None) -> None:
    """Write ``run``'s summary after the commit of ``epoch`` whose last record is ``idp``
    (``monitor_value``: the named monitor's value a BEST of this commit records)."""
    found = score_label(idp, named_monitor=named_monitor,
                        monitor_value=monitor_value if named_monitor else None)
    what, value = (None, None) if found is None else found
    net, distribution = net_label(run)

    def read_best(path: Any) -> tuple[int | None, str | None, float | None]:
        return best_score(run.id, path)

    write_summary(run.path, epoch=epoch, iter_idx=idp.iter_idx, net=net,
                  distribution=distribution, salt=run.salt,
                  data_id=run.loop_params.data_id, best_of_this_commit=(epoch, what, value),
                  best_score=read_best)
