"""The HIP backend for AMD GPUs: detection and target names only; compiling is not implemented yet."""
