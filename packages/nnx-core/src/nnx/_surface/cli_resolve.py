"""How the ``nnx runs`` commands resolve a run named on the command line: the id itself,
or the one run it is a prefix of (``show``, ``verify`` and ``report`` share it)."""

from __future__ import annotations

import sys

__all__ = ["resolve_run_id"]


def resolve_run_id(root: str, text: str) -> str | None:
    """The run ``text`` names under ``root``: itself, or the one run it is a prefix of. An
    ambiguous prefix prints its candidates on stderr and gives None; an id nothing
    matches passes through, so the command reports "no run" as before."""
    from nnx._persistence.run_rows import matching_run_ids  # lazy: torch-free

    matches = matching_run_ids(root, text)
    if len(matches) <= 1:
        return matches[0] if matches else text
    shown = ", ".join(matches[:10]) + (f" and {len(matches) - 10} more"
                                       if len(matches) > 10 else "")
    print(f"run id prefix {text!r} is ambiguous under {root}: "
          f"{len(matches)} runs match ({shown}); give more of the id", file=sys.stderr)
    return None
