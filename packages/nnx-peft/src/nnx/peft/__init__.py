"""Parameter-efficient fine-tuning (spec §11): adapters that train a few new
parameters on a frozen base."""

__all__: list[str] = []
