"""The built-in networks that ``Nets`` members build from their params.

``Nets.FEED_FWD`` → :class:`FeedFwdNN`, ``Nets.CONV`` → :class:`ConvNN`,
``Nets.VIT`` → :class:`ViTNN`, ``Nets.MOE`` → :class:`MoEFeedFwdNN` (whose
hidden layers are :class:`MoELinear`). Every net returns raw logits and
offers ``unpack_batch`` so training code need not know its input layout.
Each name is imported on first use (issue 38): a feed-forward fit loads no other net.
"""

from typing import TYPE_CHECKING

from nnx._foundation.lazy_exports import lazy_package

#: name -> the module it is read from; the TYPE_CHECKING block below lists the same.
_EXPORTS: dict[str, str] = {
    "ConvNN": "nnx.nets.conv",
    "FeedFwdNN": "nnx.nets.feedforward",
    "MoEFeedFwdNN": "nnx.nets.moe",
    "MoELinear": "nnx.nets.moe",
    "ViTNN": "nnx.nets.vit",
}

__all__ = sorted(_EXPORTS)

lazy_package(__name__)

if TYPE_CHECKING:
    from nnx.nets.conv import ConvNN as ConvNN
    from nnx.nets.feedforward import FeedFwdNN as FeedFwdNN
    from nnx.nets.moe import MoEFeedFwdNN as MoEFeedFwdNN
    from nnx.nets.moe import MoELinear as MoELinear
    from nnx.nets.vit import ViTNN as ViTNN
