// tlx_packed.h -- TileLang's packed x2 math (T.add2 ... T.abs2) and T.fast_rcp, in inline PTX (sm_80).
// A pair of 16-bit floats travels in one 32-bit register, lane 0 in the low half, as __half2 and
// __nv_bfloat162 hold it; each paired instruction rounds each lane once (.rn: never contracted).
// bfloat16 add / sub / mul are fma.rn.bf16x2 with 1.0 / -1.0 / -0.0 operands (add.bf16x2 and its
// siblings need sm_90), which round the same exact result once, signed zeros included.
TLX_DEV tlx_u32 tlx_h2(float lo, float hi) { tlx_u32 r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
TLX_DEV tlx_u32 tlx_b2(float lo, float hi) { tlx_u32 r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
TLX_DEV float tlx_h2_lane(tlx_u32 v, int lane) { tlx_half h; h.x = (unsigned short)(lane ? v >> 16 : v & 0xffffu); return tlx_h2f(h); }
TLX_DEV float tlx_b2_lane(tlx_u32 v, int lane) { return __uint_as_float(lane ? v & 0xffff0000u : v << 16); }
#define TLX_PACKED2(name, op) \
  TLX_DEV tlx_u32 name(tlx_u32 a, tlx_u32 b) { tlx_u32 d; asm(op " %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b)); return d; }
TLX_PACKED2(tlx_add2_h, "add.rn.f16x2")
TLX_PACKED2(tlx_sub2_h, "sub.rn.f16x2")
TLX_PACKED2(tlx_mul2_h, "mul.rn.f16x2")
TLX_PACKED2(tlx_max2_h, "max.f16x2")
TLX_PACKED2(tlx_min2_h, "min.f16x2")
TLX_PACKED2(tlx_max2_b, "max.bf16x2")
TLX_PACKED2(tlx_min2_b, "min.bf16x2")
#undef TLX_PACKED2
TLX_DEV tlx_u32 tlx_fma2_h(tlx_u32 a, tlx_u32 b, tlx_u32 c) {
  tlx_u32 d; asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); return d;
}
TLX_DEV tlx_u32 tlx_fma2_b(tlx_u32 a, tlx_u32 b, tlx_u32 c) {
  tlx_u32 d; asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c)); return d;
}
TLX_DEV tlx_u32 tlx_add2_b(tlx_u32 a, tlx_u32 b) { return tlx_fma2_b(a, 0x3f803f80u, b); }
TLX_DEV tlx_u32 tlx_sub2_b(tlx_u32 a, tlx_u32 b) { return tlx_fma2_b(b, 0xbf80bf80u, a); }
TLX_DEV tlx_u32 tlx_mul2_b(tlx_u32 a, tlx_u32 b) { return tlx_fma2_b(a, b, 0x80008000u); }
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
