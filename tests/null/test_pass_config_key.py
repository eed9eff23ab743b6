"""``tilelang.PassConfigKey``: TileLang's enum keys reach the stages as their string values."""

from __future__ import annotations

import tilelang_x as tilelang
from tests.kernels import gemm
from tilelang_x.compiler import build
from tilelang_x.frontend.jit import _options
from tilelang_x.target import Target


def test_enum_keys_become_their_strings() -> None:
    options = _options({tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True, "tlx.persistent": False}, None, False)
    assert options["pass_configs"] == {"tl.disable_tma_lower": True, "tlx.persistent": False}
    assert all(type(k) is str for k in options["pass_configs"])


def test_an_enum_key_switches_the_backend() -> None:
    func = gemm.matmul.get_ir(256, 256, 256, block_M=128, block_N=128, block_K=64, num_stages=3, threads=256)
    def kernel_body(pass_configs: object) -> str:
        source = build(func, Target("cuda", "sm_90a"), _options(pass_configs, None, False)).source
        return source[source.index("__global__"):]

    assert "tlx_tma_load" in kernel_body(None)
    assert "tlx_tma_load" not in kernel_body({tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True})


def test_every_tlx_key_the_stages_read_is_known() -> None:
    """A ``"tlx.*"`` string in the compiler's sources is a pass config a stage reads; one missing
    from ``TLX_SWITCHES`` / ``TLX_VALUED`` would be refused as unknown at compile time."""
    import pathlib
    import re

    from tilelang_x.pass_config import TLX_SWITCHES, TLX_VALUED

    root = pathlib.Path(__file__).resolve().parents[2]
    found = {key for folder in ("core_ir", "frontend", "plugins", "tilelang_x")
             for path in (root / folder).rglob("*.py")
             for key in re.findall(r"\"(tlx\.[a-z0-9_]+)\"", path.read_text())}
    assert found - (TLX_SWITCHES | TLX_VALUED) == set()
