"""From-scratch training on the retrieval task (CPU first; torchrun for data parallelism)."""
