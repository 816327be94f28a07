"""gpu_tok inside other libraries' pipelines: `ray` (Ray Data), `hf_datasets`
(Hugging Face datasets), `collate` (PyTorch DataLoader collation and length
buckets). Each module imports its library only when used."""
