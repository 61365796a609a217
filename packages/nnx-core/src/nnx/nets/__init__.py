"""The built-in networks that ``Nets`` members build from their params.

``Nets.FEED_FWD`` → :class:`FeedFwdNN`, ``Nets.CONV`` → :class:`ConvNN`,
``Nets.VIT`` → :class:`ViTNN`, ``Nets.MOE`` → :class:`MoEFeedFwdNN` (whose
hidden layers are :class:`MoELinear`). Every net returns raw logits and
offers ``unpack_batch`` so training code need not know its input layout.
"""

from nnx.nets.conv import ConvNN
from nnx.nets.feedforward import FeedFwdNN
from nnx.nets.moe import MoEFeedFwdNN, MoELinear
from nnx.nets.vit import ViTNN

__all__ = ["ConvNN", "FeedFwdNN", "MoEFeedFwdNN", "MoELinear", "ViTNN"]
