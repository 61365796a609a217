"""``nnx runs report [IDS...] -o report.html``: several runs on one self-contained HTML
page (their ``nnx runs list`` rows side by side, their losses overlaid, the configuration
fields that differ), drawn by nnx-viz (``nnx.vis_utils.write_runs_report``), imported on
call: core never imports an add-on at import time.

All or nothing: an unknown id, an ambiguous prefix, a damaged run (named or found under
the root) or a run of an add-on that is not installed is reported on stderr with exit 1,
and nothing is written; the page itself is written atomically. A report that left out a
run it could not read would compare the others as if they were all there.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from nnx._foundation.plugins import MissingDistributionError, require_distribution
from nnx._surface.cli_resolve import resolve_run_id

__all__ = ["add_report_parser", "cmd_runs_report"]


def _run_ids(args: argparse.Namespace) -> list[str] | None:
    """Each named run as ``nnx runs show`` resolves it (an id, or a prefix of exactly one;
    a name twice is one run); None after an ambiguous prefix was reported."""
    ids: list[str] = []
    for text in args.run_ids:
        run_id = resolve_run_id(args.root, text)
        if run_id is None:
            return None
        if run_id not in ids:
            ids.append(run_id)
    return ids


def _runs(args: argparse.Namespace, ids: list[str]) -> list[Any] | None:
    """The runs to report (every run under the root without ids); None after the damaged
    runs found under the root were reported."""
    from nnx._persistence.run import NNRun, display_path  # lazy: loads torch

    if ids:
        return [NNRun.load(run_id, root=args.root) for run_id in ids]
    runs, damaged = NNRun.scan(args.root)
    for bad in damaged:
        print(f"run {bad.run_id} is damaged: {display_path(bad.path)}: {bad.reason}",
              file=sys.stderr)
    if damaged:
        print("nothing written: name the runs to report (nnx runs report ID ...) to leave "
              "the damaged ones out", file=sys.stderr)
        return None
    return runs


def cmd_runs_report(args: argparse.Namespace) -> int:
    """Write the report; exit 1, with nothing written, when any run cannot be read."""
    try:
        report = require_distribution("nnx-viz", "nnx.vis_utils", needed_by="nnx runs report")
    except MissingDistributionError as exc:
        print(exc, file=sys.stderr)
        return 1
    ids = _run_ids(args)
    if ids is None:
        return 1
    try:
        runs = _runs(args, ids)
        if runs is None:
            return 1
        if not runs:
            print(f"no runs under {args.root}/: nothing written", file=sys.stderr)
            return 1
        written = report.write_runs_report(runs, args.output, root=args.root)
    except (FileNotFoundError, ValueError, MissingDistributionError) as exc:
        # As ``nnx runs show``: an unknown id, RunDamagedError (a ValueError), a planted
        # link (UnsafePathError), an add-on's run without its distribution (the hint).
        print(exc, file=sys.stderr)
        return 1
    print(f"report: {written.resolve()} ({len(runs)} run{'s' if len(runs) != 1 else ''})")
    return 0


def add_report_parser(runs_sub: Any) -> None:
    """``nnx runs report`` under ``nnx runs``."""
    report = runs_sub.add_parser(
        "report", help="several runs on one self-contained HTML page (no server; opens "
        "offline): their status, BEST and its score, created and data id side by side, "
        "their training / validation losses overlaid with improving epochs marked, and the "
        "configuration fields that differ; every run under the root without IDS. Exit 1 "
        "with nothing written when a run is unknown or damaged; needs nnx-viz")
    report.add_argument("run_ids", nargs="*", metavar="ID",
                        help="a run id, or a prefix of exactly one (default: every run)")
    report.add_argument("-o", "--output", required=True, metavar="OUT.html")
    report.add_argument("--root", default="runs")
    report.set_defaults(func=cmd_runs_report)
