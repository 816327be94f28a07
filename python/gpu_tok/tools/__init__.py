"""Tools around the library: `bench` (the benchmark harness) and `peers` (the
tokenizers it is measured against), `convert` (tiktoken encodings ->
tokenizer.json), `_prebuilt` (the wheel's prebuilt kernels)."""
