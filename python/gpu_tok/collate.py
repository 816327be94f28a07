"""Old path of `gpu_tok.integrations.collate` (the same module under both names)."""

from ._alias import alias

alias(__name__, "gpu_tok.integrations.collate")
