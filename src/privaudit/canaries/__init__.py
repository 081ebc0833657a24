"""The canaries: crafting them, training with and without them (sequential and batched runs) and writing
their scores (``data/canaries/<defender>/``). Modules are imported by name; the package exports nothing."""
