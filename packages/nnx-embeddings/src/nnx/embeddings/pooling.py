"""A net's output on token ids as one embedding per text.

The embedder net maps ``(B, L)`` token ids to either ``(B, D)`` (it pools itself) or
``(B, L, D)`` per-token states, which are averaged over each row's real tokens only
(the lengths :func:`~nnx.embeddings.tokens.encode_texts` returns), so padding never
shifts an embedding and a text embeds the same alone or in any batch.
"""

from __future__ import annotations

import torch

__all__ = ["pool"]


def pool(output: torch.Tensor, lengths: torch.Tensor, who: str) -> torch.Tensor:
    """``(B, D)`` embeddings of a ``(B, D)`` or ``(B, L, D)`` net output."""
    if not isinstance(output, torch.Tensor) or not output.is_floating_point():
        got = output.dtype if isinstance(output, torch.Tensor) else type(output).__name__
        raise ValueError(f"{who}: the net must return a floating tensor; got {got}")
    rows = lengths.shape[0]
    if output.dim() == 2 and output.shape[0] == rows:
        return output
    if output.dim() == 3 and output.shape[0] == rows:
        positions = torch.arange(output.shape[1], device=output.device)
        mask = (positions[None, :] < lengths.to(output.device)[:, None]).to(output.dtype)
        summed = (output * mask[:, :, None]).sum(dim=1)
        return summed / lengths.to(output.device, output.dtype)[:, None]
    raise ValueError(f"{who}: the net must map ({rows}, L) token ids to ({rows}, D) embeddings "
                     f"or ({rows}, L, D) token states; got shape {tuple(output.shape)}")
