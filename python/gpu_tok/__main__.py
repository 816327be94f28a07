"""`python -m gpu_tok`: the same as the `gpu-tok` command."""

import sys

from .cli import main

sys.exit(main())
