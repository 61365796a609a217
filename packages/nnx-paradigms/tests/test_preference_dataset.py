"""NNPreferenceDataset: validated (prompt, chosen, rejected) triples, right-padded batches."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("nnx.lm")

from _dpo_tiny import PAD, TRIPLES, V

from nnx.paradigms import NNPreferenceDataset


def test_the_loader_right_pads_each_part_with_the_pad_id():
    data = NNPreferenceDataset(TRIPLES, pad_id=PAD, vocab_size=V)
    assert len(data) == 4
    prompt, chosen, rejected = next(iter(data.loader(2)))
    assert prompt.tolist() == [[1, 2, 3], [7, 0, 0]]
    assert chosen.tolist() == [[4, 5, 0, 0], [8, 9, 10, 11]]
    assert rejected.tolist() == [[6, 0], [12, 2]]
    assert [len(b[0]) for b in data.loader(3)] == [3, 1]


def test_tensors_and_lists_are_accepted_alike():
    a = NNPreferenceDataset([([1, 2], [3], [4])], pad_id=0, vocab_size=5)
    b = NNPreferenceDataset([(torch.tensor([1, 2]), torch.tensor([3]), torch.tensor([4]))],
                            pad_id=0, vocab_size=5)
    assert all(torch.equal(x, y) for x, y in zip(a[0], b[0], strict=True))


@pytest.mark.parametrize("triples, kwargs, match", [
    ([], {}, "at least one triple"),
    ([([1], [2])], {}, r"triples\[0\] must be \(prompt, chosen, rejected\)"),
    ([([1], [], [2])], {}, r"triples\[0\].chosen is empty"),
    ([([1], [2], [3, 0, 4])], {}, r"triples\[0\].rejected contains the pad id 0 at position 1"),
    ([([1], [2], [3]), ([1], [V], [3])], {}, r"triples\[1\].chosen has token ids outside"),
    ([([1], [2.0], [3])], {}, "integer token ids"),
    ([([1], [True], [3])], {}, "integer token ids"),
    ([(torch.ones(1, 2, dtype=torch.long), [2], [3])], {}, "1-D integer tensor"),
    ([([1], [2], [3])], {"pad_id": V}, "pad_id"),
    ([([1], [2], [3])], {"vocab_size": 0}, "vocab_size"),
    ("abc", {}, "sequence of"),
])
def test_bad_triples_are_refused_naming_the_triple_and_part(triples, kwargs, match):
    with pytest.raises(ValueError, match=match):
        NNPreferenceDataset(triples, **{"pad_id": PAD, "vocab_size": V, **kwargs})


def test_a_bad_batch_size_is_refused():
    with pytest.raises(ValueError, match="batch_size"):
        NNPreferenceDataset(TRIPLES, pad_id=PAD, vocab_size=V).loader(0)
