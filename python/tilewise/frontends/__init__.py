"""Frontends: models from other frameworks as tilewise graphs. ``torch/``: ``tw.from_torch``."""
