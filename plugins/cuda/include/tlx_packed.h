// tlx_packed.h -- TileLang's packed x2 math (T.add2 ... T.abs2) and T.fast_rcp, in inline PTX (sm_80).
// The paired 16-bit instructions (tlx_add2_h ...) and packing (tlx_cvt_h2) are in tlx_cuda.h; here
// a lane's value, abs, the float32 lanes' max / min, and fast_rcp.
TLX_DEV float tlx_h2_lane(tlx_u32 v, int lane) { tlx_half h; h.x = (unsigned short)(lane ? v >> 16 : v & 0xffffu); return tlx_h2f(h); }
TLX_DEV float tlx_b2_lane(tlx_u32 v, int lane) { return __uint_as_float(lane ? v & 0xffff0000u : v << 16); }
TLX_DEV tlx_u32 tlx_abs2_h(tlx_u32 a) { tlx_u32 d; asm("abs.f16x2 %0, %1;" : "=r"(d) : "r"(a)); return d; }
TLX_DEV tlx_u32 tlx_abs2_b(tlx_u32 a) { tlx_u32 d; asm("abs.bf16x2 %0, %1;" : "=r"(d) : "r"(a)); return d; }
// float32 lanes: one correctly rounded instruction each; of two zeros, max is +0 unless both are -0
// and min is -0 if either is (the order max.f16x2 gives 16-bit lanes).
TLX_DEV float tlx_max2_f(float a, float b) {
  return a == 0.0f && b == 0.0f ? __uint_as_float(__float_as_uint(a) & __float_as_uint(b)) : fmaxf(a, b);
}
TLX_DEV float tlx_min2_f(float a, float b) {
  return a == 0.0f && b == 0.0f ? __uint_as_float(__float_as_uint(a) | __float_as_uint(b)) : fminf(a, b);
}
// T.fast_rcp: within 1 ulp of 1/x; subnormal inputs and results flush to zero (PTX ISA, rcp).
TLX_DEV float tlx_fast_rcp(float x) { float y; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
