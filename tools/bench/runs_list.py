"""What ``nnx runs list`` costs as a user feels it: the whole command as a subprocess
(interpreter start and imports included) over roots of N finished runs.

The runs are one real 5-epoch fit copied under salted ids (``commit_cost.populate``),
each copy's listing summary rewritten as its own commit would have written it (its id
and salt). Roots of 5, 120 and 1,000 runs are timed in interleaved rounds, plus the
1,000 runs with their summaries removed (runs written before summaries: the full path
through the checkpoints). Medians with min-max; the 120/5 ratio per round.

    uv run python tools/bench/runs_list.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import yaml

from nnx._foundation.hashing import canonical_bytes, sha256_hex
from nnx._persistence.run_summary import history_signature
from tools.bench.commit_cost import populate
from tools.bench.harness import machine

SIZES = (5, 120, 1000)


def _own_summaries(root: Path) -> None:
    """Each copy's summary as its commit would have written it: its id, its salt."""
    for run in root.iterdir():
        path = run / "summary.json"
        if not path.is_file():
            continue
        body = json.loads(path.read_text())["body"]
        body["run_id"] = run.name
        body["salt"] = yaml.safe_load((run / "run.yaml").read_text()).get("salt")
        # populate wrote a run.yaml that hashes to the copy's id: the check the commit
        # makes before it records the bytes' digest
        body["files"]["run.yaml"] = sha256_hex((run / "run.yaml").read_bytes())
        body["history"] = history_signature(run)  # the copy's own idps.csv, as its commit
        path.unlink()  # a hard link may share it with another root
        path.write_bytes(canonical_bytes({"body": body,
                                          "sha256": sha256_hex(canonical_bytes(body))}))


def build(tmp: Path) -> dict[str, Path]:
    """The roots: N runs each (hard links of the 1,000), and the 1,000 without summaries."""
    full = tmp / "n1000"
    populate(full, 1000)
    if (full / "best").is_dir() and not (full / "best").is_symlink():
        shutil.rmtree(full / "best")  # runs/best's copy fallback: not a run of its own
    _own_summaries(full)
    roots = {"1000": full}
    # runs/best is a link to one of them (it too "has" a run.yaml): not a run to copy
    ids = sorted(p.name for p in full.iterdir()
                 if not p.is_symlink() and (p / "run.yaml").is_file())
    for n in SIZES[:-1]:
        roots[str(n)] = tmp / f"n{n}"
        for run_id in ids[:n]:
            shutil.copytree(full / run_id, roots[str(n)] / run_id, copy_function=os.link)
    old = tmp / "old1000"
    for run_id in ids:
        shutil.copytree(full / run_id, old / run_id, copy_function=os.link,
                        ignore=shutil.ignore_patterns("summary.json"))
    roots["1000 old"] = old
    return roots


def time_list(root: Path, *, fallback: bool) -> float:
    """One ``nnx runs list`` over ``root``; refuses a run that took the other path than
    the one being measured (the note on stderr says how many took the full one)."""
    start = time.perf_counter()
    code = ("import sys; from nnx.cli import main; "
            f"sys.exit(main(['runs', 'list', '--root', {str(root)!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0 or ("listed from their checkpoints" in done.stderr) != fallback:
        raise SystemExit(f"{root}: exit {done.returncode}\n{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-old", action="store_true", help="skip the fallback root")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        roots = build(Path(tmp))
        if args.no_old:
            roots.pop("1000 old")
        times: dict[str, list[float]] = {label: [] for label in roots}
        for r in range(args.repeats):
            order = list(roots) if r % 2 == 0 else list(roots)[::-1]
            for label in order:
                times[label].append(time_list(roots[label], fallback=label.endswith("old")))
    info = machine()
    print(f"nnx runs list (whole command, subprocess), {args.repeats} interleaved rounds; "
          f"{info['cpu']}; load {info['load']}")
    for label, values in times.items():
        print(f"  {label:>9} runs: median {statistics.median(values):.3f} s "
              f"(min {min(values):.3f}, max {max(values):.3f})")
    ratios = [b / a for a, b in zip(times["5"], times["120"], strict=True)]
    print(f"  120/5 ratio: median {statistics.median(ratios):.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
