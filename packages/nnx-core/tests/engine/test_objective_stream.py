"""ObjectiveStream: an objective's own lazily seeded, checkpointable generator (§6.5, §14.1)."""

from __future__ import annotations

import pytest
import torch

from nnx.objectives import ObjectiveStream


def test_a_seeded_stream_is_reproducible_and_never_touches_the_global_rng() -> None:
    global_state = torch.get_rng_state()
    a, b = ObjectiveStream("demo", 7), ObjectiveStream("demo", 7)
    assert torch.equal(torch.rand(4, generator=a.generator), torch.rand(4, generator=b.generator))
    assert torch.equal(torch.get_rng_state(), global_state)
    assert a.seed == 7


def test_without_a_seed_one_global_draw_seeds_it_at_first_use_not_at_construction() -> None:
    torch.manual_seed(3)
    stream = ObjectiveStream("demo")
    assert torch.equal(torch.get_rng_state(), torch.manual_seed(3).get_state())  # nothing drawn
    torch.manual_seed(3)
    first = torch.rand(2, generator=stream.generator)
    after = torch.get_rng_state()
    torch.manual_seed(3)
    seed = int(torch.randint(0, 2**62, (1,)).item())
    assert torch.equal(torch.get_rng_state(), after)  # exactly that one draw
    assert torch.equal(first, torch.rand(2, generator=torch.Generator().manual_seed(seed)))


def test_the_state_round_trip_continues_the_stream() -> None:
    stream = ObjectiveStream("demo", 1)
    assert stream.state() == {"seed": 1, "generator": None}  # never drawn
    torch.rand(3, generator=stream.generator)
    saved = stream.state()
    expected = torch.rand(3, generator=stream.generator)
    resumed = ObjectiveStream("demo", 1)
    assert resumed.problems("demo.objective", saved) == []
    resumed.load(saved)
    assert torch.equal(torch.rand(3, generator=resumed.generator), expected)
    resumed.load({"seed": 1, "generator": None})  # a never-drawn save starts afresh
    assert torch.equal(torch.rand(3, generator=resumed.generator),
                       torch.rand(3, generator=torch.Generator().manual_seed(1)))


def test_problems_and_bad_seeds() -> None:
    stream = ObjectiveStream("demo", 0)
    assert stream.problems("demo.objective", {"generator": [1, 2]}) == [
        "demo.objective: the saved generator state is not a tensor"]
    for bad in (True, 1.5, "3", -1):
        with pytest.raises(ValueError, match="demo seed"):
            ObjectiveStream("demo", bad)  # type: ignore[arg-type]
