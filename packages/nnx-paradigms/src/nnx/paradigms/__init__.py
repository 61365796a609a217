"""Training paradigms (spec §10): step factories and objectives on nnx-core's one
update engine."""

__all__: list[str] = []
