"""The Ascend backend for Huawei NPUs: detection and target names only; compiling is not implemented yet."""
