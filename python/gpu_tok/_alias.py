"""Old import paths kept for users (and for pickles made before the move):
each old module is the new module itself, under its old name too."""

from __future__ import annotations

import importlib
import sys


def alias(old: str, new: str) -> None:
    """Makes `import old` give the module `new` (the same object: one set of
    globals, so settings and monkeypatches reach both names)."""
    sys.modules[old] = importlib.import_module(new)
