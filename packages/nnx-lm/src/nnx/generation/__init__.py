"""Generation (spec §2.4, §15): logits processors and LogitsChain."""
