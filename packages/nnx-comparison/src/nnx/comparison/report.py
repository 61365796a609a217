"""ComparisonReport: summaries and paired comparisons as rows, text and strict JSON.

``save`` writes ``nnx.comparison/1`` JSON through nnx-core's atomic writer: the
observations, each comparison's inputs (which observations form each side, the pairing
text, the bootstrap) and the results. ``load`` re-derives the results from the stored
observations and refuses a file whose stored results disagree (ReportIntegrityError), so
an edited mean or delta never loads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nnx.comparison.bootstrap import Bootstrap
from nnx.comparison.errors import ComparisonError, ReportIntegrityError
from nnx.comparison.observation import Observation
from nnx.comparison.pairing import PairedComparison, compare
from nnx.comparison.rows import comparison_rows, summary_rows
from nnx.comparison.summary import Summary, summarize
from nnx.comparison.text import render_text
from nnx.extend import atomic_write_text, canonical_bytes, load_json

__all__ = ["FORMAT", "ComparisonReport"]

FORMAT = "nnx.comparison/1"
_KEYS = {"format", "observations", "comparisons", "results"}
_SPEC_KEYS = {"a", "b", "pairing", "bootstrap"}


def _indices(where: str, side: Sequence[Observation], index: Mapping[Observation, int]
             ) -> list[int]:
    missing = [o.run_id for o in side if o not in index]
    if missing:
        raise ComparisonError(f"{where}: run(s) {', '.join(missing)} are not among the "
                              "report's observations")
    return [index[o] for o in side]


@dataclass(frozen=True, slots=True)
class ComparisonReport:
    """The observations, their :class:`Summary` and the paired comparisons."""

    observations: tuple[Observation, ...]
    summary: Summary
    comparisons: tuple[PairedComparison, ...]

    @classmethod
    def build(cls, observations: Iterable[Observation],
              comparisons: Iterable[PairedComparison] = ()) -> ComparisonReport:
        """Summarize ``observations``; every compared observation must be among them."""
        items = tuple(observations)
        summary = summarize(items)  # checks the items (types, one per attempt and metric)
        done = tuple(comparisons)
        index = {obs: i for i, obs in enumerate(items)}
        for k, comparison in enumerate(done):
            if not isinstance(comparison, PairedComparison):
                raise TypeError(f"comparisons[{k}] must be a PairedComparison (from compare); "
                                f"got {type(comparison).__name__}")
            for side in (comparison.a, comparison.b):
                _indices(f"comparisons[{k}]", side.observations, index)
        return cls(items, summary, done)

    def table(self) -> list[dict[str, Any]]:
        """One plain-JSON row per group, observation, comparison, pair and unmatched
        replicate, in input order."""
        rows = summary_rows(self.summary)
        for k, comparison in enumerate(self.comparisons):
            rows += comparison_rows(k, comparison)
        return rows

    def text(self) -> str:
        return render_text(self.summary.groups, self.comparisons)

    def document(self) -> dict[str, Any]:
        """The ``nnx.comparison/1`` document :meth:`save` writes."""
        index = {obs: i for i, obs in enumerate(self.observations)}
        specs = [{"a": _indices("a", c.a.observations, index),
                  "b": _indices("b", c.b.observations, index), "pairing": c.pairing,
                  "bootstrap": None if c.bootstrap is None else c.bootstrap.state()}
                 for c in self.comparisons]
        return {"format": FORMAT, "observations": [o.state() for o in self.observations],
                "comparisons": specs, "results": self.table()}

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write strict JSON atomically (the previous file survives a failed write)."""
        text = json.dumps(self.document(), indent=2, sort_keys=True, allow_nan=False)
        atomic_write_text(path, text + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ComparisonReport:
        """Read a saved report, re-deriving its results (ReportIntegrityError when the
        stored ones disagree; ValueError for anything that is not such a report)."""
        # strict: a duplicate key, NaN or Infinity is refused, as the writer never emits them
        return cls.from_document(load_json(path, strict=True))

    @classmethod
    def from_document(cls, doc: Any) -> ComparisonReport:
        if not isinstance(doc, Mapping) or doc.get("format") != FORMAT:
            raise ValueError(f"not an {FORMAT} report")
        if set(doc) != _KEYS:
            raise ValueError(f"an {FORMAT} report has exactly {sorted(_KEYS)}; got {sorted(doc)}")
        if not isinstance(doc["observations"], list) or not isinstance(doc["comparisons"], list):
            raise ValueError("observations and comparisons must be lists")
        items = tuple(Observation.from_state(state) for state in doc["observations"])
        done = [_rederive(k, spec, items) for k, spec in enumerate(doc["comparisons"])]
        report = cls.build(items, done)
        if canonical_bytes(report.table()) != canonical_bytes(doc["results"]):
            raise ReportIntegrityError("the stored results disagree with the results "
                                       "re-derived from the stored observations; the report "
                                       "was edited or damaged")
        return report


def _rederive(k: int, spec: Any, items: tuple[Observation, ...]) -> PairedComparison:
    if not isinstance(spec, Mapping) or set(spec) != _SPEC_KEYS:
        raise ValueError(f"comparisons[{k}] has exactly {sorted(_SPEC_KEYS)}")
    sides = []
    for name in ("a", "b"):
        refs = spec[name]
        if not isinstance(refs, list) or not all(
                type(i) is int and 0 <= i < len(items) for i in refs):
            raise ValueError(f"comparisons[{k}].{name} must list observation indices")
        sides.append([items[i] for i in refs])
    boot = None if spec["bootstrap"] is None else Bootstrap.from_state(spec["bootstrap"])
    return compare(sides[0], sides[1], pairing=spec["pairing"], bootstrap=boot)
