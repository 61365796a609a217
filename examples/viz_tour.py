"""A tour of nnx.viz (nnx-viz, spec §12), offline, in a few seconds.

A small image classifier (a conv layer, a frozen-in-eval BatchNorm and a dense head) is
trained for a few steps on a synthetic task, then drawn every way nnx.viz draws a model:
its parameter table, its weights, one conv layer's channel maps, its gradient flow, and
integrated-gradients / occlusion attributions. Each figure is written as an HTML
file, with one plotly.min.js beside them (no network needed), into a fresh temporary
directory, and the script checks that
none of the helpers changed the model's train / eval modes.

    uv run python examples/viz_tour.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch import nn

from nnx.viz import activation_map, attribute, gradient_flow, summary, weight_histogram


class TinyConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.norm = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.head = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.relu(self.norm(self.conv1(x)))).flatten(1))


def task(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Class 1 images have a bright top-left quadrant."""
    x = torch.randn(n, 1, 8, 8) * 0.3
    y = torch.randint(0, 2, (n,))
    x[y == 1, :, :4, :4] += 1.0
    return x, y


def main() -> None:
    torch.manual_seed(0)
    net = TinyConv()
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    x, y = task(256)
    for _ in range(30):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
    print(f"trained: loss {loss.item():.3f}")
    net.norm.eval()  # a mixed tree: nnx.viz must hand it back exactly so
    modes = {name: m.training for name, m in net.named_modules()}

    out = Path(tempfile.mkdtemp(prefix="nnx-viz-tour-"))
    stats = summary(net, input_size=(1, 1, 8, 8))
    print(f"summary: {stats.total_params} parameters, {stats.total_mult_adds} mult-adds")
    figures = {
        "weights": weight_histogram(net),
        "conv1": activation_map(net, x[y == 1][:1], "conv1"),
        "gradients": gradient_flow(net),  # the last step's gradients
    }
    sample = x[y == 1][:2]
    for method in ("integrated_gradients", "occlusion"):
        attribution, fig = attribute(net, sample, method=method, target=1)
        top_left = attribution[:, :, :4, :4].abs().sum().item()
        share = top_left / attribution.abs().sum().item()
        print(f"{method}: {share:.0%} of the attribution in the bright quadrant")
        assert share > 0.5, share  # the quadrant the classes differ in explains class 1
        figures[method] = fig
    for name, fig in figures.items():
        path = out / f"{name}.html"
        # One plotly.min.js beside the pages (not a copy in each): they open offline.
        fig.write_html(path, include_plotlyjs="directory")
        print(f"wrote {path.name} ({path.stat().st_size // 1024} KiB)")
    assert (out / "plotly.min.js").is_file()
    assert {name: m.training for name, m in net.named_modules()} == modes
    print(f"figures in {out}; modes unchanged")


if __name__ == "__main__":
    main()
