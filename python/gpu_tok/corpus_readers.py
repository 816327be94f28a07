"""Old path of `gpu_tok.corpus.readers` (the same module under both names)."""

from ._alias import alias

alias(__name__, "gpu_tok.corpus.readers")
