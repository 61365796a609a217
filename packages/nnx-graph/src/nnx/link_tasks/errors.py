"""The named refusals of ``nnx.link_tasks`` (spec §26).

Each is a ``ValueError`` so a caller catching bad input catches them, and each is raised
before anything changes: no negative is sampled, no batch reaches a forward pass, no
weight moves.
"""

from __future__ import annotations

__all__ = ["LinkBatchError", "LinkCapacityError", "LinkReplayError", "LinkSplitError"]


class LinkSplitError(ValueError):
    """An edge split that breaks the manifest's rules: a non-canonical, repeated or
    cross-split edge, a barred self-loop, a negative that is a positive, a bad request."""


class LinkCapacityError(LinkSplitError):
    """More negatives requested than the static complement holds (raised before sampling)."""


class LinkReplayError(LinkSplitError):
    """``LinkSplit.replay(edge_index)`` re-derived another split than the manifest's."""


class LinkBatchError(ValueError):
    """A link batch that does not match its split and role (checked before any forward)."""
