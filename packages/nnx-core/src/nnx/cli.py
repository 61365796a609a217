"""The ``nnx`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata

__all__ = ["main"]


def installed_distributions() -> list[tuple[str, str]]:
    """(name, version) of every installed nnx distribution, nnx-core first."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").strip()
        canonical = name.lower().replace("_", "-")
        needs_core = any(r.replace("_", "-").startswith("nnx-core") for r in dist.requires or [])
        if canonical == "nnx-core" or (canonical.startswith("nnx-") and needs_core):
            found[canonical] = dist.version
    return sorted(found.items(), key=lambda item: (item[0] != "nnx-core", item[0]))


def _devices() -> list[str]:
    import torch

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

    import torch

    print("nnx distributions:")
    for name, version in installed_distributions():
        print(f"  {name} {version}")
    print(f"python {platform.python_version()}")
    print(f"torch {torch.__version__}")
    print(f"devices: {', '.join(_devices())}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from nnx.demo import run_demo

    return run_demo(epochs=args.epochs, seed=args.seed)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nnx", description="NNx: config-addressed PyTorch training."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="installed nnx distributions, torch and devices")
    info.set_defaults(func=cmd_info)
    demo = sub.add_parser("demo", help="train a small classifier on embedded data")
    demo.add_argument("--epochs", type=int, default=20)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
