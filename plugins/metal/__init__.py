"""The Metal backend for Apple GPUs: detection and target names only; compiling is not implemented yet."""
