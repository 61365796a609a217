"""The ``nnx`` command line.

Everything that loads torch (the persistence modules, the demo) is imported inside
the command that needs it: ``nnx --help`` and a mistyped command answer in well
under a second instead of the several seconds torch takes to import.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nnx._foundation.plugins import MissingDistributionError
from nnx._foundation.validation import check_run_id
from nnx._persistence.point_position import COMPLETED_EPOCH
from nnx._surface.cli_report import add_report_parser
from nnx._surface.cli_resolve import resolve_run_id

if TYPE_CHECKING:
    from nnx._persistence.run_rows import RunSummary

__all__ = ["main"]


def installed_distributions() -> list[tuple[str, str]]:
    """(name, version) of every installed nnx distribution, nnx-core first."""
    from importlib import metadata  # lazy: a costly import only --version needs

    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").strip()
        canonical = name.lower().replace("_", "-")
        needs_core = any(r.replace("_", "-").startswith("nnx-core") for r in dist.requires or [])
        if canonical == "nnx-core" or (canonical.startswith("nnx-") and needs_core):
            found[canonical] = dist.version
    return sorted(found.items(), key=lambda item: (item[0] != "nnx-core", item[0]))


def _devices() -> list[str]:
    import torch  # lazy: only `nnx info` needs torch (module docstring)

    seen = ["cpu"]
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            seen.append(f"cuda:{i} ({torch.cuda.get_device_name(i)})")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        seen.append("mps")
    return seen


def cmd_info(_: argparse.Namespace) -> int:
    import platform

    import torch  # lazy: only `nnx info` needs torch (module docstring)

    print("nnx distributions:")
    for name, version in installed_distributions():
        print(f"  {name} {version}")
    print(f"python {platform.python_version()}")
    print(f"torch {torch.__version__}")
    print(f"devices: {', '.join(_devices())}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from nnx._surface.demo import run_demo  # lazy: loads torch (module docstring)

    return run_demo(epochs=args.epochs, seed=args.seed, salt=args.salt,
                    overwrite=args.overwrite, verbose=False if args.quiet else None)


def _damaged_row(run_id: str, path: Path, reason: str) -> str:
    from nnx._persistence.run_damage import display_path  # lazy: only listing needs it

    return f"{run_id:<32}  damaged  {display_path(path)}: {reason}"


def _tags(row: RunSummary) -> str:
    tags = [f"salt={row.salt}"] if row.salt else []
    tags += [f"data={row.data_id}"] if row.data_id else []
    return " ".join(tags) or "-"


def _list_row(row: RunSummary, mark: str, tags_width: int, net_width: int = 8) -> str:
    from nnx._persistence.run_rows import format_score  # lazy: only listing needs it

    created = "-" if row.created is None else row.created.strftime("%Y-%m-%d %H:%M")
    if row.best_epoch is None:
        best = "-"
    elif row.best_what is None or row.best_value is None:
        best = f"epoch {row.best_epoch}, no finite score"
    else:
        best = f"{row.best_what} {format_score(row.best_what, row.best_value)} @ epoch " \
               f"{row.best_epoch}"
    return (f"{row.run_id:<32}  {row.net:<{net_width}}  {row.epochs:>6}  {row.status:<11}  "
            f"{best:<28}  {created:<16}  {_tags(row):<{tags_width}}  {mark}").rstrip()


def cmd_runs_list(args: argparse.Namespace) -> int:
    """Every run under the root; a damaged run is a row naming its file and the problem,
    and the exit status is 1 when there is one (every readable run is still listed)."""
    # Torch-free: rows come from the runs' summaries; only a run without one (written
    # before summaries) is read from its checkpoints, which loads torch then.
    from nnx._persistence.best_pointer import current_best  # lazy: only listing needs it
    from nnx._persistence.run_rows import list_runs  # lazy: only listing needs it

    rows, rest = list_runs(args.root)
    damaged = []
    read_slowly = []  # why each run the full path listed (a damaged one has its own row)
    if rest:  # lazy: loads torch, only for runs without a trusted summary
        from nnx._persistence.run_damage import DamagedRun, RunDamagedError  # lazy: fallback only
        from nnx._persistence.run_listing import summarize_run  # lazy: fallback only

        for entry in rest:
            try:
                rows.append(summarize_run(args.root, entry.path.name))
                read_slowly.append(entry.reason)
            except RunDamagedError as exc:
                damaged.append(DamagedRun(exc.run_id, exc.path, exc.reason))
    if not rows and not damaged:
        print(f"no runs under {args.root}/")
        return 0
    best = current_best(Path(args.root))
    width = max([len("salt / data"), *(len(_tags(row)) for row in rows)])
    # As wide as the widest net: "TRANSFORMER (needs nnx-lm)" keeps the columns aligned.
    net_width = max([8, *(len(row.net) for row in rows)])
    lines = {d.run_id: _damaged_row(d.run_id, d.path, d.reason) for d in damaged}
    for row in rows:
        lines[row.run_id] = _list_row(row, "*" if row.run_id == best else "", width, net_width)
    if note := _full_path_note(read_slowly):
        print(note, file=sys.stderr)
    print(f"{'run id':<32}  {'net':<{net_width}}  {'epochs':>6}  {'status':<11}  "
          f"{'best (what it scores)':<28}  {'created':<16}  {'salt / data':<{width}}  best")
    for run_id in sorted(lines):
        print(lines[run_id])
    return 1 if damaged else 0


def _full_path_note(reasons: list[str]) -> str | None:
    """Why runs were read from their checkpoints (the slower way), when their rows do not
    say it themselves: an absent add-on's run shows "(needs <distribution>)", a damaged
    one its damage; neither is a summary out of date."""
    from nnx._persistence.run_rows import CHANGED, NO_SUMMARY  # lazy: only listing needs it

    old, changed = reasons.count(NO_SUMMARY), reasons.count(CHANGED)
    if not old and not changed:
        return None
    why = [*([f"{old} without a listing summary (written before summaries)"] if old else []),
           *([f"{changed} whose summary no longer matches its files"] if changed else [])]
    total = old + changed
    return (f"({total} run{'s' if total != 1 else ''} listed from their checkpoints: "
            f"{'; '.join(why)}; each epoch commit writes a run's summary anew)")


def cmd_runs_show(args: argparse.Namespace) -> int:
    """One run (by its id or a unique prefix); a missing, damaged or malformed id, or an
    ambiguous prefix, is reported on stderr with exit 1."""
    # Lazy (module docstring). Torch-free for a run with a trusted listing summary: it
    # answers for LAST's and BEST's records; any other run is read from its checkpoints.
    from nnx._persistence.run import NNRun

    run_id = resolve_run_id(args.root, args.run_id)
    if run_id is None:
        return 1
    try:
        try:
            run: NNRun | None = NNRun.load(run_id, root=args.root, summary=True)
            text = str(run)  # rendering reads BEST and the history: damage surfaces here too
        except MissingDistributionError as missing:  # an add-on's run, shown without it
            if args.plot is not None:  # its chart needs the run, so the add-on, loaded
                raise
            from nnx._persistence.add_on_run import render_add_on_run  # lazy: loads torch

            run, text = None, render_add_on_run(args.root, run_id, missing)
        if run is not None and args.plot is not None:
            text += f"\nchart: {run.chart(args.plot)}"
    except (FileNotFoundError, ValueError, MissingDistributionError) as exc:
        print(exc, file=sys.stderr)  # RunDamagedError is a ValueError; no nnx-viz: its hint
        return 1
    print(text)
    return 0


def _points(directory: Path) -> dict[str, Path]:
    """Each resume point of a checkpoints directory by the name verify reports: the tag of
    a ``<tag>.pt``, the file name of a ``.safetensors`` snapshot."""
    from nnx._persistence.checkpoint import checkpoint_files  # lazy: loads torch

    def label(path: Path) -> str:
        return path.name.removesuffix(".pt")

    points = {label(path): path for path in checkpoint_files(directory)}
    # A live manifest whose checkpoint is gone is a torn point: report it too.
    for manifest in directory.glob("*.manifest.json"):
        checkpoint = manifest.with_name(manifest.name.removesuffix(".manifest.json"))
        if checkpoint.suffix in (".pt", ".safetensors") and ".opt." not in checkpoint.name:
            points.setdefault(label(checkpoint), checkpoint)
    return points


def _leftovers(root: str, run_id: str, *, repair: bool, reported: set[str]) -> bool:
    """Report (or with ``repair`` remove, under the run's lease) the temps and staged
    manifests a kill stranded in the run, but those in ``reported`` (a point's line names
    them already); True when they could not even be listed."""
    # lazy: loads torch (module docstring)
    from nnx._persistence.leftovers import find_leftovers, remove_leftovers

    _best_temps(root, repair=repair)
    try:
        if not repair:
            if found := [n for n in find_leftovers(root, run_id) if n not in reported]:
                print(f"warn leftovers  {', '.join(found)} (--repair removes them)")
            return False
        removed = remove_leftovers(root, run_id)
    except (OSError, ValueError) as exc:  # an unsafe path (a planted link) included
        print(f"FAIL leftovers  {type(exc).__name__}: {exc}")
        return True
    if removed is None:
        print(f"skipped leftovers  run {run_id} is being trained (its lease is held); "
              "repair it once training ends")
    elif removed:
        print(f"repaired leftovers  removed {', '.join(removed)}")
    return False


def _best_temps(root: str, *, repair: bool) -> None:
    """Report (or with ``repair`` remove, under ``.best.lock``) the runs root's own
    leftovers: runs/best's hand-over temps a kill stranded (``.best.<pid>.*``)."""
    from nnx._persistence.leftovers import find_best_temps, remove_best_temps  # lazy

    if not repair:
        if found := find_best_temps(root):
            print(f"warn root  {', '.join(found)} (--repair removes them)")
        return
    removed = remove_best_temps(root)
    if removed is None:
        print("skipped root  runs/best is being handed over (.best.lock is held); "
              "repair again once training ends")
    elif removed:
        print(f"repaired root  removed {', '.join(removed)}")


def cmd_runs_verify(args: argparse.Namespace) -> int:
    """One line per resume point of the run; exit 1 when any fails (spec §14.3)."""
    from nnx._persistence.point_manifest import ResumePointError  # lazy: loads torch
    from nnx._persistence.point_verify import verify_point  # lazy: loads torch
    from nnx._persistence.resume_point import (  # lazy: loads torch (module docstring)
        repair_point,
        stray_files,
    )

    run_id = resolve_run_id(args.root, args.run_id)
    if run_id is None:
        return 1
    run_dir = Path(args.root) / run_id
    try:
        check_run_id("run id", run_id)
        bad_id = False
    except ValueError:
        bad_id = True
    if not bad_id and _incomplete(Path(args.root), run_id):
        return 0
    if bad_id or not ((run_dir / "run.yaml").is_file() or (run_dir / "checkpoints").is_dir()):
        print(f"no run {args.run_id!r} under {args.root}", file=sys.stderr)
        return 1
    failed = _run_files_fail(args.root, run_id)
    points = _points(run_dir / "checkpoints")
    reported: set[str] = set()  # orphans a point's own line names
    if not points:
        print(f"run {run_id} has no checkpoints")
    for tag, path in sorted(points.items()):
        try:
            # root=: a symbolic link below the runs root is refused (FAIL), never followed.
            point = verify_point(path, root=Path(args.root))
            removed = repair_point(path, root=Path(args.root)) if args.repair else []
        except ResumePointError as exc:
            failed = True
            detail = str(exc).removeprefix(f"{exc.kind} resume point: ")
            print(f"FAIL {tag}  {exc.kind}: {detail}")
            continue
        except Exception as exc:  # unreadable beyond what verify classifies
            failed = True
            print(f"FAIL {tag}  {type(exc).__name__}: {exc}")
            continue
        if point is None:
            print(f"ok  {tag}  legacy")
        else:
            epoch = point.position.get(COMPLETED_EPOCH, "?")
            staged = "  (staged manifest)" if point.staged else ""
            print(f"ok  {tag}  generation {point.generation}  epoch {epoch}{staged}")
        if removed:
            print(f"repaired {tag}  removed {', '.join(removed)}")
        elif strays := stray_files(path):
            # Not a failure: the point is whole; these are what a kill before the
            # clean-up left. The next save of the tag, or --repair, removes them.
            print(f"warn {tag}  orphan files {', '.join(strays)} (the next save or "
                  "--repair removes them)")
            reported.update(f"checkpoints/{name}" for name in strays)
    failed |= _owed(Path(args.root), run_id, repair=args.repair)
    # After the points: their own orphans stay on their own lines.
    failed = _leftovers(args.root, run_id, repair=args.repair, reported=reported) or failed
    return 1 if failed else 0


def _incomplete(root: Path, run_id: str) -> bool:
    """Report an empty reservation as ``nnx runs list`` shows it (incomplete, or running
    while its lease is held): no point to verify, and no damage. True when it is one."""
    from nnx._persistence.reservation_shape import is_empty_reservation  # lazy: verify only
    from nnx._persistence.run_rows import incomplete_row  # lazy: verify only

    if not is_empty_reservation(root / run_id):
        return False
    status = incomplete_row(root, run_id).status
    print(f"run {run_id} is {status}: an empty reservation (a fit was killed before it "
          "wrote run.yaml); nothing to verify, and a plain retry of the fit reclaims it")
    return True


def _run_files_fail(root: str, run_id: str) -> bool:
    """Load the run as ``NNRun.load`` and ``nnx runs show`` do: a run whose files cannot
    be read back (a history cut short of LAST, a torn run.yaml, a symbolic link among its
    files) prints a FAIL line naming the damage. True then. A run of an add-on that is not
    installed is not damage: its points are still verified."""
    from nnx._persistence.run import NNRun  # lazy: loads torch (module docstring)

    if not os.path.lexists(Path(root) / run_id / "run.yaml"):
        return False  # checkpoints without a configuration: the points speak for it
    try:
        NNRun.load(run_id, root=root)
    except (MissingDistributionError, ImportError):
        return False
    except (OSError, ValueError) as exc:  # RunDamagedError, UnsafePathError included
        print(f"FAIL run  {type(exc).__name__}: {exc}")
        return True
    return False


def _owed(root: Path, run_id: str, *, repair: bool) -> bool:
    """Report (or, with ``repair``, write) the points LAST's epoch owes: a commit a crash
    cut short after LAST (docs/durability.md). True when some are still owed."""
    from nnx._persistence.owed_points import (  # lazy: loads torch (module docstring)
        OwedPointsBusy,
        owed_points,
        settle_owed,
    )
    from nnx._persistence.point_manifest import ResumePointError  # lazy: loads torch

    checkpoints = root / run_id / "checkpoints"
    if not (checkpoints / "last.pt").is_file():
        return False
    try:
        owed = owed_points(checkpoints)
        if repair and owed:
            written = settle_owed(root, run_id)
            print(f"repaired {', '.join(written)}  written from LAST (its epoch's commit was "
                  "cut short)")
            owed = owed_points(checkpoints)
        elif repair:
            settle_owed(root, run_id)  # a committed BEST whose hand-over was cut short
    except OwedPointsBusy as exc:
        print(f"warn last  {exc}")
        return False
    except (ResumePointError, ValueError, OSError):
        return False  # LAST itself fails (torn, a link, unreadable): reported above
    for tag in owed:
        print(f"FAIL {tag}  owed: LAST's epoch commits it but it is not written (--repair, "
              "or a resume from this run, writes it from LAST)")
    return bool(owed)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nnx", description="NNx: config-addressed PyTorch training."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="installed nnx distributions, torch and devices")
    info.set_defaults(func=cmd_info)
    demo = sub.add_parser("demo", help="train a penguin classifier on data shipped with nnx")
    demo.add_argument("--epochs", type=int, default=30)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--salt", help="record the same configuration as a separate run")
    demo.add_argument("--overwrite", action="store_true", help="replace an existing run")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.set_defaults(func=cmd_demo)
    runs = sub.add_parser("runs", help="read what training wrote under runs/")
    runs_sub = runs.add_subparsers(dest="runs_command", required=True)
    listing = runs_sub.add_parser("list", help="every run: created, net, epochs done, status "
                                  "(running / committed / interrupted, or incomplete for a "
                                  "reservation a kill left before run.yaml), its BEST score "
                                  "and what it scores, salt and data id, and the runs/best "
                                  "mark; a damaged run is listed with the file and the "
                                  "problem (exit 1 if any is damaged; an incomplete one is "
                                  "not damage)")
    listing.add_argument("--root", default="runs")
    listing.set_defaults(func=cmd_runs_list)
    show = runs_sub.add_parser("show", help="one run's configuration and epochs (exit 1 "
                               "with one line naming the file if it is damaged)")
    show.add_argument("run_id", help="a run id, or a prefix of exactly one")
    show.add_argument("--root", default="runs")
    show.add_argument("--plot", metavar="OUT.html", help="also write the run chart (losses, "
                      "the monitor with improving epochs marked, the LR) as one "
                      "self-contained HTML file; needs nnx-viz")
    show.set_defaults(func=cmd_runs_show)
    verify = runs_sub.add_parser("verify", help="check every resume point of a run, and "
                                 "that the run loads (exit 1 if a point is torn, mixed or "
                                 "corrupted, or the run is damaged, as runs list and show "
                                 "say); never unpickles")
    verify.add_argument("run_id", help="a run id, or a prefix of exactly one")
    verify.add_argument("--root", default="runs")
    verify.add_argument("--repair", action="store_true",
                        help="remove what a kill left, under the run's lease: the temps "
                        "NNx names (.<file>.<hex>), staged manifests (made live when they "
                        "match, else removed), unpublished journal chunks, and the orphan "
                        "files of points that verify (sidecars no manifest names)")
    verify.set_defaults(func=cmd_runs_verify)
    add_report_parser(runs_sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
