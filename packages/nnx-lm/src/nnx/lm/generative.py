"""GenerativeNNModel (spec §15): an NNModel over a TransformerNN that can ``generate``.

Training, evaluation, checkpoints and run ids are core's: this subclass adds
only the decoding loop and an optional tokenizer (runtime state, not part of
the run's configuration, so it never moves a run id). The loop prefills the
prompt through ``forward_with_cache`` once and then feeds one token at a time
from the cache; ``use_cache=False`` recomputes the whole sequence each step
(the reference the cache is tested and benchmarked against).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from nnx import NNCheckpoint, NNModel, NNModelParams, NNParams
from nnx.extend import Task, check_count, check_seed, preserved_state
from nnx.generation import LogitsChain, LogitsProcessor
from nnx.lm.net import KVCache, TransformerNN
from nnx.lm.stops import StopMatcher
from nnx.lm.tokenizer import NNTokenizerParams
from nnx.lm_tasks import CausalLMTask

__all__ = ["GenerativeNNModel", "Prompt"]

#: A text prompt (needs a tokenizer), a list of ids or a 1-D integer tensor of ids.
Prompt = str | Sequence[int] | torch.Tensor


class GenerativeNNModel(NNModel):
    """``GenerativeNNModel(net_params=NNTransformerParams(...), params=NNModelParams(
    net=Nets.TRANSFORMER, ...), tokenizer=NNTokenizerParams(...))``.

    Without a tokenizer, prompts and results are token ids. The net must be a
    :class:`~nnx.lm.TransformerNN` (it owns the KV cache). ``task=CausalLMTask(...)``
    makes ``train`` run the causal-LM task (docs/lm.md §6), through core's
    ``NNModel(..., task=...)``.
    """

    def __init__(self, net_params: NNParams | None = None,
                 params: NNModelParams | None = None, *,
                 tokenizer: NNTokenizerParams | None = None, task: CausalLMTask | None = None,
                 module: nn.Module | None = None, batch_adapter: Any = None) -> None:
        _check_task(task)
        super().__init__(net_params, params, task=task, module=module,
                         batch_adapter=batch_adapter)
        if not isinstance(self.net, TransformerNN):
            raise TypeError(f"GenerativeNNModel needs a TransformerNN net (Nets.TRANSFORMER); "
                            f"got {type(self.net).__name__}")
        self.tokenizer = self._checked_tokenizer(tokenizer)

    @classmethod
    def from_checkpoint(cls, checkpoint: NNCheckpoint | str | os.PathLike[str],
                        map_location: Any = "cpu", *, module: nn.Module | None = None,
                        batch_adapter: Any = None,
                        tokenizer: NNTokenizerParams | None = None,
                        task: Task | None = None) -> GenerativeNNModel:
        """Core's reload, then ``tokenizer``: a checkpoint holds the weights and the config,
        not the tokenizer, so pass the one the model was trained with."""
        _check_task(task)
        model = super().from_checkpoint(checkpoint, map_location, module=module,
                                        batch_adapter=batch_adapter, task=task)
        assert isinstance(model, GenerativeNNModel)  # core rebuilds through cls
        model.tokenizer = model._checked_tokenizer(tokenizer)
        return model

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike[str], *,
                        device: Any = None, batch_adapter: Any = None, task: Task | None = None,
                        tokenizer: NNTokenizerParams | None = None,
                        **hub_kwargs: Any) -> GenerativeNNModel:
        """Core's Hub load (``config.json`` + ``model.safetensors``), then ``tokenizer``: a
        Hub save carries the net, its config and the task spec, not the tokenizer, so pass
        the one the model was trained with (docs/hub.md)."""
        _check_task(task)
        model = super().from_pretrained(pretrained_model_name_or_path, device=device,
                                        batch_adapter=batch_adapter, task=task, **hub_kwargs)
        assert isinstance(model, GenerativeNNModel)  # core rebuilds through cls
        model.tokenizer = model._checked_tokenizer(tokenizer)
        return model

    def _checked_tokenizer(self, tokenizer: NNTokenizerParams | None) -> NNTokenizerParams | None:
        if tokenizer is None:
            return None
        if not isinstance(tokenizer, NNTokenizerParams):
            raise TypeError(f"GenerativeNNModel tokenizer must be an NNTokenizerParams; "
                            f"got {type(tokenizer).__name__}")
        if tokenizer.vocab_size > self._lm.params.vocab_size:
            raise ValueError(f"GenerativeNNModel: the tokenizer has {tokenizer.vocab_size} ids, "
                             f"more than the net's vocab_size ({self._lm.params.vocab_size})")
        return tokenizer

    @property
    def _lm(self) -> TransformerNN:
        assert isinstance(self.net, TransformerNN)  # checked by the constructor
        return self.net

    def generate(
        self,
        prompt: Prompt,
        *,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        repetition_penalty: float | None = None,
        stop: Any = None,
        seed: int | None = None,
        use_cache: bool = True,
        logits_chain: LogitsChain | None = None,
        on_token: Callable[[int], object] | None = None,
        logits_pipeline: Sequence[LogitsProcessor] | None = None,
    ) -> str | torch.Tensor | list[int]:
        """Continue ``prompt`` by up to ``max_new_tokens`` tokens; only the new part is returned.

        The result has the prompt's kind: text for a ``str`` prompt, a 1-D
        LongTensor for a tensor, a ``list[int]`` for a list. See
        docs/lm.md §6 for every argument; everything is validated before
        the net runs, and every submodule's train/eval mode is restored
        afterwards, also when decoding (or ``on_token``) raises (§13.2).
        """
        limit = self._lm.params.max_seq_len
        ids, text = self._prompt_ids(prompt)
        new = check_count("generate max_new_tokens", max_new_tokens)
        if len(ids) + new > limit:
            raise ValueError(f"generate: {len(ids)} prompt + {new} new tokens is past the net's "
                             f"max_seq_len ({limit}); shorten the prompt or max_new_tokens")
        chain = _chain(temperature, top_k, top_p, repetition_penalty, logits_chain,
                       logits_pipeline)
        stops = StopMatcher(stop, text=text, tokenizer=self.tokenizer)
        if seed is not None:
            seed = check_seed("generate seed", seed)
        if not isinstance(use_cache, bool):
            raise ValueError(f"generate use_cache must be a bool; got {use_cache!r}")
        if on_token is not None and not callable(on_token):
            raise TypeError(f"generate on_token must be callable as on_token(token_id); "
                            f"got {type(on_token).__name__}")

        device = next(self._lm.parameters()).device
        generator = None if seed is None else torch.Generator(device=device).manual_seed(seed)
        history = torch.tensor([ids], dtype=torch.long, device=device)
        out: list[int] = []
        with preserved_state(self._lm, mode="eval"), torch.no_grad():
            logits, cache = self._step(history, None, use_cache)
            for step in range(new):
                token = _pick(chain(logits, history), generator)
                history = torch.cat((history, history.new_tensor([[token]])), dim=1)
                out.append(token)
                if on_token is not None:
                    on_token(token)
                if stops.done(out) or step + 1 == new:
                    break
                logits, cache = self._step(history, cache, use_cache)
        kept = stops.trim(out)
        if text:
            assert self.tokenizer is not None  # _prompt_ids refuses text without one
            return stops.trim_text(self.tokenizer.decode(kept))
        if isinstance(prompt, torch.Tensor):
            return torch.tensor(kept, dtype=torch.long, device=prompt.device)
        return kept

    def _step(self, history: torch.Tensor, cache: KVCache | None, use_cache: bool
              ) -> tuple[torch.Tensor, KVCache | None]:
        """The next position's logits ``(1, vocab)``, and the cache to continue from."""
        if not use_cache:
            return self._lm(history)[:, -1, :], None
        fresh = history if cache is None else history[:, -1:]
        logits, cache = self._lm.forward_with_cache(fresh, cache)
        return logits[:, -1, :], cache

    def _prompt_ids(self, prompt: Prompt) -> tuple[list[int], bool]:
        """The prompt's ids, and whether it was text."""
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise ValueError("generate: a text prompt needs a tokenizer "
                                 "(GenerativeNNModel(..., tokenizer=NNTokenizerParams(...)))")
            ids, text = self.tokenizer.encode(prompt), True
        elif isinstance(prompt, torch.Tensor):
            if prompt.dim() != 1 or prompt.dtype.is_floating_point or prompt.dtype.is_complex \
                    or prompt.dtype == torch.bool:
                raise ValueError(f"generate: a tensor prompt must be a 1-D integer tensor of ids; "
                                 f"got {prompt.dtype} of shape {tuple(prompt.shape)}")
            ids, text = [int(i) for i in prompt.tolist()], False
        elif isinstance(prompt, Sequence):
            ids = [check_count(f"generate prompt[{i}]", v, minimum=0) for i, v in enumerate(prompt)]
            text = False
        else:
            raise TypeError(f"generate: prompt must be a str, a list of ids or a 1-D tensor; "
                            f"got {type(prompt).__name__}")
        if not ids:
            raise ValueError("generate: the prompt is empty; give it at least one token")
        vocab = self._lm.params.vocab_size
        bad = [i for i in ids if not 0 <= i < vocab]
        if bad:
            raise ValueError(f"generate: prompt ids {bad[:5]} are outside [0, {vocab})")
        return ids, text


def _chain(temperature: float, top_k: int | None, top_p: float | None,
           repetition_penalty: float | None, logits_chain: LogitsChain | None,
           logits_pipeline: Sequence[LogitsProcessor] | None) -> LogitsChain:
    """The processors one step runs: the scalars' standard chain, ``logits_chain``, or the
    pipeline as given. The three are exclusive, so no setting is silently dropped."""
    # Built (and so validated) first, even when a chain replaces it.
    standard = LogitsChain.standard(temperature=temperature, top_k=top_k, top_p=top_p,
                                    repetition_penalty=repetition_penalty)
    if logits_chain is None and logits_pipeline is None:
        return standard
    if logits_chain is not None and logits_pipeline is not None:
        raise ValueError("generate: pass logits_chain or logits_pipeline, not both")
    if len(standard):
        raise ValueError("generate: temperature / top_k / top_p / repetition_penalty build the "
                         "standard chain; with logits_chain or logits_pipeline put them in it")
    if logits_chain is not None:
        if not isinstance(logits_chain, LogitsChain):
            raise TypeError(f"generate logits_chain must be a LogitsChain (LogitsChain.builder()"
                            f"...build()); got {type(logits_chain).__name__}")
        return logits_chain
    if isinstance(logits_pipeline, (str, bytes)) or not isinstance(logits_pipeline, Sequence):
        raise TypeError(f"generate logits_pipeline must be a sequence of processors; "
                        f"got {type(logits_pipeline).__name__}")
    return LogitsChain(logits_pipeline)  # refuses a non-callable entry; keeps the order


def _pick(logits: torch.Tensor, generator: torch.Generator | None) -> int:
    """One id from processed ``(1, vocab)`` logits: the only finite one (greedy, no RNG
    drawn), else a sample from their softmax."""
    row = logits.reshape(-1)
    alive = row != float("-inf")
    count = int(alive.sum())
    if count == 0 or bool(torch.isnan(row).any()):
        raise ValueError("generate: the logits processors left no id to sample "
                         "(every logit -inf, or a NaN)")
    if count == 1:
        return int(alive.nonzero()[0, 0])
    probs = torch.softmax(row.double(), dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator)[0])


def _check_task(task: object) -> None:
    """A generative model trains as a causal LM: its task is a CausalLMTask or None."""
    if task is not None and not isinstance(task, CausalLMTask):
        raise TypeError(f"task must be a CausalLMTask or None; got {type(task).__name__}")
