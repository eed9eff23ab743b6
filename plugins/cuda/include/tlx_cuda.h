// tlx_cuda.h -- tilelang-x's own small device header: inline-PTX wrappers for the sm_80-class path.
// No includes: the generated source inlines this text, so NVRTC needs no include paths, and
// no templates, so it compiles fast. PTX forms follow shared/reference/backends.md section A.
#pragma nv_diag_suppress 177
typedef unsigned int tlx_u32;
typedef unsigned long long tlx_u64;
struct __align__(2) tlx_half { unsigned short x; };
struct __align__(2) tlx_bf16 { unsigned short x; };
struct __align__(16) tlx_v16 { unsigned int x, y, z, w; };
struct __align__(8) tlx_v8 { unsigned int x, y; };

#define TLX_DEV static __device__ __forceinline__

// ---- 16-bit float conversions (computation happens in fp32) ------------------------------------
// x / y from r, y's correctly rounded reciprocal (lower/reciprocal.py): the product, corrected once
// with the remainder x - q*y, which an FMA computes exactly; where the correction is not finite (a
// zero, infinite or NaN operand) or zero (whose sign the correction may lose), the product stands.
TLX_DEV float tlx_div_rcp(float x, float y, float r) {
  const float q = x * r;
  const float c = fmaf(fmaf(-q, y, x), r, q);
  return isfinite(c) && c != 0.0f ? c : q;
}
TLX_DEV float tlx_h2f(tlx_half h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.x)); return f; }
TLX_DEV tlx_half tlx_f2h(float f) { tlx_half h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(f)); return h; }
TLX_DEV float tlx_b2f(tlx_bf16 h) { return __uint_as_float(((unsigned int)h.x) << 16); }
TLX_DEV tlx_bf16 tlx_f2b(float f) { tlx_bf16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.x) : "f"(f)); return h; }
TLX_DEV tlx_u32 tlx_pack_h2(tlx_half lo, tlx_half hi) { return (tlx_u32)lo.x | ((tlx_u32)hi.x << 16); }
TLX_DEV tlx_u32 tlx_pack_b2(tlx_bf16 lo, tlx_bf16 hi) { return (tlx_u32)lo.x | ((tlx_u32)hi.x << 16); }

// ---- float8 (torch float8_e4m3fn / float8_e5m2) in software, for every arch: computation happens
// in fp32; conversions round to nearest even; e4m3 saturates to +-448 (NaN stays NaN), e5m2
// overflows to +-inf, as the interpreter does.
struct __align__(1) tlx_e4m3 { unsigned char x; };
struct __align__(1) tlx_e5m2 { unsigned char x; };
TLX_DEV float tlx_e4m32f(tlx_e4m3 v) {
  unsigned int e = (v.x >> 3) & 0xfu, m = v.x & 7u;
  float f = (e == 0xfu && m == 7u) ? __int_as_float(0x7fffffff)
          : e == 0u ? (float)m * 0.001953125f : __uint_as_float(((e + 120u) << 23) | (m << 20));
  return (v.x & 0x80u) ? -f : f;
}
TLX_DEV float tlx_e5m22f(tlx_e5m2 v) { tlx_half h; h.x = (unsigned short)(v.x << 8); return tlx_h2f(h); }
TLX_DEV tlx_e4m3 tlx_f2e4m3(float f) {
  unsigned int u = __float_as_uint(f), a = u & 0x7fffffffu, s = (u >> 24) & 0x80u, r;
  if (a > 0x7f800000u) r = 0x7fu;                                    // NaN
  else if (__uint_as_float(a) >= 448.0f) r = 0x7eu;                   // saturate (ties at 464 -> 448)
  else if (a < 0x3c800000u) r = (unsigned int)rintf(__uint_as_float(a) * 512.0f);  // below 2^-6: subnormal
  else r = ((a + 0x7ffffu + ((a >> 20) & 1u)) >> 20) - (120u << 3);    // keep 3 mantissa bits, RNE
  tlx_e4m3 v; v.x = (unsigned char)(s | r); return v;
}
TLX_DEV tlx_e5m2 tlx_f2e5m2(float f) {
  unsigned int u = __float_as_uint(f), a = u & 0x7fffffffu, s = (u >> 24) & 0x80u, r;
  if (a > 0x7f800000u) r = 0x7fu;                                     // NaN
  else if (a < 0x38800000u) r = (unsigned int)rintf(__uint_as_float(a) * 65536.0f);  // below 2^-14: subnormal
  else { r = ((a + 0xfffffu + ((a >> 21) & 1u)) >> 21) - (112u << 2); if (r > 0x7cu) r = 0x7cu; }  // RNE; inf
  tlx_e5m2 v; v.x = (unsigned char)(s | r); return v;
}

// exp2 on the MUFU unit (ex2.approx.ftz: about 2 ulp; results under 2^-126 flush to zero), the
// softmax idiom's exp2; exp2f adds range fix-ups around the same instruction.
TLX_DEV float tlx_exp2f(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }

// ---- integer helpers ------------------------------------------------------------------------------
TLX_DEV int tlx_floordiv(int a, int b) { int q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
TLX_DEV int tlx_floormod(int a, int b) { int r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
TLX_DEV long long tlx_floordiv64(long long a, long long b) { long long q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
TLX_DEV long long tlx_floormod64(long long a, long long b) { long long r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }

// ---- shared-memory addresses ----------------------------------------------------------------------
TLX_DEV tlx_u32 tlx_smem_addr(const void* p) {
  tlx_u32 r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}

// ---- cp.async (sm_80): src_bytes = 0 zero-fills the destination ---------------------------------
TLX_DEV void tlx_cp_async16(tlx_u32 dst, const void* src, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(pred ? 16 : 0) : "memory");
}
TLX_DEV void tlx_cp_async8(tlx_u32 dst, const void* src, bool pred) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" :: "r"(dst), "l"(src), "r"(pred ? 8 : 0) : "memory");
}
TLX_DEV void tlx_cp_async4(tlx_u32 dst, const void* src, bool pred) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" :: "r"(dst), "l"(src), "r"(pred ? 4 : 0) : "memory");
}
// Synchronous vector copies with a zero-fill predicate (the non-pipelined path).
TLX_DEV void tlx_copy16(void* d, const void* s, bool p) {
  tlx_v16 v = {0u, 0u, 0u, 0u}; if (p) v = *(const tlx_v16*)s; *(tlx_v16*)d = v;
}
TLX_DEV void tlx_copy8(void* d, const void* s, bool p) { tlx_v8 v = {0u, 0u}; if (p) v = *(const tlx_v8*)s; *(tlx_v8*)d = v; }
TLX_DEV void tlx_copy4(void* d, const void* s, bool p) {
  unsigned int v = 0u; if (p) v = *(const unsigned int*)s; *(unsigned int*)d = v;
}
// Vector stores of w adjacent elements (the vector epilogue, lower/epilogue.py; the caller proves
// the address is w*elem-byte aligned): one 4/8/16-byte store instead of w element stores. Values
// come in fp32 and are rounded once (round to nearest even), as an element store rounds them.
TLX_DEV tlx_u32 tlx_cvt_h2(float lo, float hi) {
  tlx_u32 r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;
}
TLX_DEV tlx_u32 tlx_cvt_b2(float lo, float hi) {
  tlx_u32 r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;
}
// Paired 16-bit float arithmetic (half_pairs.py, and T.add2 ... T.abs2 in packed.py): a pair in one
// 32-bit register, lane 0 in the low half, as __half2 and __nv_bfloat162 hold it; each lane rounded
// once to nearest even (.rn: never contracted). bf16x2 add / sub / mul need sm_90: fma.rn.bf16x2
// with 1.0 / -1.0 / -0.0 operands rounds the same exact result once, signed zeros included.
#define TLX_PAIR_OP(name, ins) \
  TLX_DEV tlx_u32 name(tlx_u32 a, tlx_u32 b) { tlx_u32 r; asm(ins " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
TLX_PAIR_OP(tlx_add2_h, "add.rn.f16x2")
TLX_PAIR_OP(tlx_sub2_h, "sub.rn.f16x2")
TLX_PAIR_OP(tlx_mul2_h, "mul.rn.f16x2")
TLX_PAIR_OP(tlx_max2_h, "max.f16x2")
TLX_PAIR_OP(tlx_min2_h, "min.f16x2")
TLX_PAIR_OP(tlx_max2_b, "max.bf16x2")
TLX_PAIR_OP(tlx_min2_b, "min.bf16x2")
#undef TLX_PAIR_OP
TLX_DEV tlx_u32 tlx_fma2_h(tlx_u32 a, tlx_u32 b, tlx_u32 c) {
  tlx_u32 r; asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
TLX_DEV tlx_u32 tlx_fma2_b(tlx_u32 a, tlx_u32 b, tlx_u32 c) {
  tlx_u32 r; asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
TLX_DEV tlx_u32 tlx_add2_b(tlx_u32 a, tlx_u32 b) { return tlx_fma2_b(a, 0x3f803f80u, b); }
TLX_DEV tlx_u32 tlx_sub2_b(tlx_u32 a, tlx_u32 b) { return tlx_fma2_b(b, 0xbf80bf80u, a); }
TLX_DEV tlx_u32 tlx_mul2_b(tlx_u32 a, tlx_u32 b) { return tlx_fma2_b(a, b, 0x80008000u); }
TLX_DEV void tlx_st2_h(tlx_half* p, tlx_u32 v) { p[0].x = (unsigned short)v; p[1].x = (unsigned short)(v >> 16); }
TLX_DEV void tlx_st2_b(tlx_bf16* p, tlx_u32 v) { p[0].x = (unsigned short)v; p[1].x = (unsigned short)(v >> 16); }
TLX_DEV void tlx_st2(tlx_half* p, float a, float b) { *(tlx_u32*)p = tlx_cvt_h2(a, b); }
TLX_DEV void tlx_st2(tlx_bf16* p, float a, float b) { *(tlx_u32*)p = tlx_cvt_b2(a, b); }
// Vector loads of w adjacent elements of a tensor into w registers (global -> fragment copies,
// lower/vector_load.py; the caller proves the address is w*elem-byte aligned): one 4/8/16-byte load
// instead of w element loads, each element converted to its register's type as an element copy
// converts it; zeros when the vector lies outside the tensor (pred false).
TLX_DEV void tlx_ld_to(tlx_half* d, tlx_half s) { *d = s; }
TLX_DEV void tlx_ld_to(tlx_bf16* d, tlx_bf16 s) { *d = s; }
TLX_DEV void tlx_ld_to(float* d, float s) { *d = s; }
TLX_DEV void tlx_ld_to(int* d, int s) { *d = s; }
TLX_DEV void tlx_ld_to(float* d, tlx_half s) { *d = tlx_h2f(s); }
TLX_DEV void tlx_ld_to(float* d, tlx_bf16 s) { *d = tlx_b2f(s); }
TLX_DEV void tlx_ld_to(tlx_half* d, float s) { *d = tlx_f2h(s); }
TLX_DEV void tlx_ld_to(tlx_bf16* d, float s) { *d = tlx_f2b(s); }
template <typename S, typename... D>
TLX_DEV void tlx_ldv(const S* p, bool pred, D*... d) {
  struct __align__(sizeof...(D) * sizeof(S)) V { S v[sizeof...(D)]; } x{};
  if (pred) x = *(const V*)p;
  int i = 0;
  (tlx_ld_to(d, x.v[i++]), ...);
}
// The same from one tensor to another (a global -> global copy), W elements a load and a store.
template <int W, typename D, typename S>
TLX_DEV void tlx_cpv(D* d, const S* s, bool pred) {
  struct __align__(W * sizeof(S)) VS { S v[W]; } x{};
  struct __align__(W * sizeof(D)) VD { D v[W]; } y;
  if (pred) x = *(const VS*)s;
#pragma unroll
  for (int e = 0; e < W; ++e) tlx_ld_to(&y.v[e], x.v[e]);
  *(VD*)d = y;
}
// Vector float32 atomic adds (sm_90+, red.global.add.v2/.v4.f32): a fragment's adjacent columns
// added into global memory with one reduction each run (T.atomic_add of a region, lower/atomic.py).
TLX_DEV void tlx_red_add2(float* p, float a, float b) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" :: "l"(p), "f"(a), "f"(b) : "memory");
}
TLX_DEV void tlx_red_add4(float* p, float a, float b, float c, float d) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}
TLX_DEV void tlx_st2(float* p, float a, float b) {
  tlx_v8 v = {__float_as_uint(a), __float_as_uint(b)}; *(tlx_v8*)p = v;
}
TLX_DEV void tlx_st4(tlx_half* p, float a, float b, float c, float d) {
  tlx_v8 v = {tlx_cvt_h2(a, b), tlx_cvt_h2(c, d)}; *(tlx_v8*)p = v;
}
TLX_DEV void tlx_st4(tlx_bf16* p, float a, float b, float c, float d) {
  tlx_v8 v = {tlx_cvt_b2(a, b), tlx_cvt_b2(c, d)}; *(tlx_v8*)p = v;
}
TLX_DEV void tlx_st4(float* p, float a, float b, float c, float d) {
  tlx_v16 v = {__float_as_uint(a), __float_as_uint(b), __float_as_uint(c), __float_as_uint(d)}; *(tlx_v16*)p = v;
}
TLX_DEV void tlx_st2(int* p, int a, int b) { tlx_v8 v = {(tlx_u32)a, (tlx_u32)b}; *(tlx_v8*)p = v; }
TLX_DEV void tlx_st4(int* p, int a, int b, int c, int d) {
  tlx_v16 v = {(tlx_u32)a, (tlx_u32)b, (tlx_u32)c, (tlx_u32)d}; *(tlx_v16*)p = v;
}
TLX_DEV void tlx_st8(tlx_half* p, float a, float b, float c, float d, float e, float f, float g, float h) {
  tlx_v16 v = {tlx_cvt_h2(a, b), tlx_cvt_h2(c, d), tlx_cvt_h2(e, f), tlx_cvt_h2(g, h)}; *(tlx_v16*)p = v;
}
TLX_DEV void tlx_st8(tlx_bf16* p, float a, float b, float c, float d, float e, float f, float g, float h) {
  tlx_v16 v = {tlx_cvt_b2(a, b), tlx_cvt_b2(c, d), tlx_cvt_b2(e, f), tlx_cvt_b2(g, h)}; *(tlx_v16*)p = v;
}
// The same from w consecutive registers of a fragment of the destination's 16-bit type: packed, not
// converted (a tile computed in registers and stored to shared memory for a gemm).
#define TLX_ST16(T, PACK)                                                                       \
  TLX_DEV void tlx_st2(T* p, const T* x) { *(tlx_u32*)p = PACK(x[0], x[1]); }                  \
  TLX_DEV void tlx_st4(T* p, const T* x) {                                                    \
    tlx_v8 v = {PACK(x[0], x[1]), PACK(x[2], x[3])}; *(tlx_v8*)p = v;                         \
  }                                                                                           \
  TLX_DEV void tlx_st8(T* p, const T* x) {                                                    \
    tlx_v16 v = {PACK(x[0], x[1]), PACK(x[2], x[3]), PACK(x[4], x[5]), PACK(x[6], x[7])};     \
    *(tlx_v16*)p = v;                                                                         \
  }
TLX_ST16(tlx_half, tlx_pack_h2)
TLX_ST16(tlx_bf16, tlx_pack_b2)
#undef TLX_ST16
TLX_DEV void tlx_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
#define TLX_CP_ASYNC_WAIT(n) asm volatile("cp.async.wait_group " #n ";" ::: "memory")

// ---- ldmatrix (sm_75): lanes 8i..8i+7 address the rows of matrix i ------------------------------
TLX_DEV void tlx_ldsm_x1(tlx_u32* r, tlx_u32 a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(a));
}
TLX_DEV void tlx_ldsm_x2(tlx_u32* r, tlx_u32 a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}
TLX_DEV void tlx_ldsm_x4(tlx_u32* r, tlx_u32 a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
TLX_DEV void tlx_ldsm_x1_t(tlx_u32* r, tlx_u32 a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];" : "=r"(r[0]) : "r"(a));
}
TLX_DEV void tlx_ldsm_x2_t(tlx_u32* r, tlx_u32 a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}
// stmatrix (sm_90, the staged epilogue, lower/staged_epilogue.py): lanes 8i..8i+7 address the 16-byte
// rows of matrix i; register i of lane l is row l/4, elements 2(l%4), 2(l%4)+1 of matrix i.
TLX_DEV void tlx_stsm_x4(tlx_u32 a, tlx_u32 r0, tlx_u32 r1, tlx_u32 r2, tlx_u32 r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};"
               :: "r"(a), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}
// stmatrix.trans (lower/transposed_epilogue.py): the same registers, each matrix stored transposed
// (lane 8i+k addresses the row that receives column k of matrix i).
TLX_DEV void tlx_stsm_x4_t(tlx_u32 a, tlx_u32 r0, tlx_u32 r1, tlx_u32 r2, tlx_u32 r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};"
               :: "r"(a), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}
TLX_DEV void tlx_ldsm_x4_t(tlx_u32* r, tlx_u32 a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

// ---- mma.sync m16n8k16, fp32 accumulate (backends.md A1 fragment layouts) -------------------------
TLX_DEV void tlx_mma_f16(float* c, const tlx_u32* a, const tlx_u32* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
TLX_DEV void tlx_mma_bf16(float* c, const tlx_u32* a, const tlx_u32* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// The same with zero accumulators in (c = a*b): a clearing gemm's first k-step, no zero stores.
TLX_DEV void tlx_mma_f16_z(float* c, const tlx_u32* a, const tlx_u32* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
               : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
}
TLX_DEV void tlx_mma_bf16_z(float* c, const tlx_u32* a, const tlx_u32* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
               : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
}
// TF32 (float32 T.gemm, pass config tlx.fp32_gemm = "tf32"): operands rounded as cvt.rna does,
// then m16n8k8 steps with 4 A and 2 B registers (the A and C fragments of m16n8k16, half the K).
TLX_DEV tlx_u32 tlx_tf32(float f) { tlx_u32 r; asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f)); return r; }
TLX_DEV float tlx_tf32f(float f) { return __uint_as_float(tlx_tf32(f)); }
TLX_DEV void tlx_tf32_regs(tlx_u32* r, int n) {
  for (int j = 0; j < n; ++j) r[j] = tlx_tf32(__uint_as_float(r[j]));
}
TLX_DEV void tlx_mma_tf32(float* c, const tlx_u32* a, const tlx_u32* b) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
TLX_DEV void tlx_mma_tf32_z(float* c, const tlx_u32* a, const tlx_u32* b) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
               : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
}
// 8-bit T.gemm (int8/uint8 with int32 accumulators, float8): m16n8k32 steps, the A/B registers
// holding 4 bytes of K each (the byte layout of the fp16 atoms); tlx_ld_b4 gathers 4 bytes, the
// lowest K first, read as bytes (a float8 element's load would convert it to float).
TLX_DEV tlx_u32 tlx_ld_b4(const void* p0, const void* p1, const void* p2, const void* p3) {
  const unsigned char *b0 = (const unsigned char*)p0, *b1 = (const unsigned char*)p1;
  const unsigned char *b2 = (const unsigned char*)p2, *b3 = (const unsigned char*)p3;
  return (tlx_u32)*b0 | ((tlx_u32)*b1 << 8) | ((tlx_u32)*b2 << 16) | ((tlx_u32)*b3 << 24);
}
// One m16n8k32 form: C is CT (int or float, asm constraint CC), DT the accumulator's PTX type.
#define TLX_MMA_K32(NAME, CT, CC, DT, TA, TB, ZERO)                                                        \
  TLX_DEV void tlx_mma_##NAME(CT* c, const tlx_u32* a, const tlx_u32* b) {                                 \
    asm volatile("mma.sync.aligned.m16n8k32.row.col." #DT "." #TA "." #TB "." #DT                           \
                 " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                                  \
                 : "+" CC(c[0]), "+" CC(c[1]), "+" CC(c[2]), "+" CC(c[3])                                  \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));                      \
  }                                                                                                        \
  TLX_DEV void tlx_mma_##NAME##_z(CT* c, const tlx_u32* a, const tlx_u32* b) {                             \
    asm volatile("mma.sync.aligned.m16n8k32.row.col." #DT "." #TA "." #TB "." #DT                           \
                 " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"                              \
                 : "=" CC(c[0]), "=" CC(c[1]), "=" CC(c[2]), "=" CC(c[3])                                  \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), CC(ZERO));            \
  }
TLX_MMA_K32(s8s8, int, "r", s32, s8, s8, 0)
TLX_MMA_K32(s8u8, int, "r", s32, s8, u8, 0)
TLX_MMA_K32(u8s8, int, "r", s32, u8, s8, 0)
TLX_MMA_K32(u8u8, int, "r", s32, u8, u8, 0)
// float8 (sm_89+): the same atoms with fp32 accumulators
TLX_MMA_K32(e4m3e4m3, float, "f", f32, e4m3, e4m3, 0.0f)
TLX_MMA_K32(e4m3e5m2, float, "f", f32, e4m3, e5m2, 0.0f)
TLX_MMA_K32(e5m2e4m3, float, "f", f32, e5m2, e4m3, 0.0f)
TLX_MMA_K32(e5m2e5m2, float, "f", f32, e5m2, e5m2, 0.0f)
// A operand of one m16k16 atom from 8 consecutive 16-bit registers of a fragment.
TLX_DEV void tlx_afrag_h(tlx_u32* a, const tlx_half* x) {
  a[0] = tlx_pack_h2(x[0], x[1]); a[1] = tlx_pack_h2(x[2], x[3]);
  a[2] = tlx_pack_h2(x[4], x[5]); a[3] = tlx_pack_h2(x[6], x[7]);
}
TLX_DEV void tlx_afrag_b(tlx_u32* a, const tlx_bf16* x) {
  a[0] = tlx_pack_b2(x[0], x[1]); a[1] = tlx_pack_b2(x[2], x[3]);
  a[2] = tlx_pack_b2(x[4], x[5]); a[3] = tlx_pack_b2(x[6], x[7]);
}

// ---- warp shuffles ----------------------------------------------------------------------------------
TLX_DEV float tlx_shfl_xor(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
TLX_DEV int tlx_shfl_xor_i(int v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
TLX_DEV double tlx_shfl_xor_d(double v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
TLX_DEV long long tlx_shfl_xor_l(long long v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
TLX_DEV unsigned int tlx_shfl_xor_u(unsigned int v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }

// ---- named barriers (T.sync_threads(id, count), T.named_barrier_arrive): whole warps arrive ---------
TLX_DEV void tlx_bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(n) : "memory"); }
TLX_DEV void tlx_bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(n) : "memory"); }

// ---- atomics ---------------------------------------------------------------------------------------
TLX_DEV void tlx_atomic_add_h(tlx_half* p, float v) {
  tlx_half h = tlx_f2h(v);
  asm volatile("red.global.add.noftz.f16 [%0], %1;" :: "l"(p), "h"(h.x) : "memory");
}
// updates returning the element's previous value (return_prev=True; a plain T.atomic_* discards
// it); generic addresses, so a shared or a global element
TLX_DEV tlx_half tlx_atomic_fetch_add_h(tlx_half* p, float v) {
  tlx_half h = tlx_f2h(v), old;
  asm volatile("atom.add.noftz.f16 %0, [%1], %2;" : "=h"(old.x) : "l"(p), "h"(h.x) : "memory");
  return old;
}
TLX_DEV tlx_bf16 tlx_atomic_fetch_add_b(tlx_bf16* p, float v) {  // CAS on the enclosing 32-bit word
  unsigned long long a = (unsigned long long)p;
  unsigned int* w = (unsigned int*)(a & ~3ull);
  unsigned int sh = (a & 2ull) ? 16u : 0u, old = *w, assumed;
  tlx_bf16 cur;
  do {
    assumed = old;
    cur.x = (unsigned short)((assumed >> sh) & 0xffffu);
    tlx_bf16 nv = tlx_f2b(tlx_b2f(cur) + v);
    unsigned int next = (assumed & ~(0xffffu << sh)) | ((unsigned int)nv.x << sh);
    old = atomicCAS(w, assumed, next);
  } while (old != assumed);
  return cur;
}
TLX_DEV float tlx_atomic_fetch_max_f(float* p, float v) {
  return v >= 0.0f ? __int_as_float(atomicMax((int*)p, __float_as_int(v)))
                   : __uint_as_float(atomicMin((unsigned int*)p, __float_as_uint(v)));
}
TLX_DEV float tlx_atomic_fetch_min_f(float* p, float v) {
  return v >= 0.0f ? __int_as_float(atomicMin((int*)p, __float_as_int(v)))
                   : __uint_as_float(atomicMax((unsigned int*)p, __float_as_uint(v)));
}
// bitwise atomics on 8/16-bit integers: the same operation on the aligned 32-bit word holding the
// element, with bits that leave the other bytes as they are (0 for or/xor, 1 for and)
TLX_DEV unsigned int* tlx_word_of(void* p, unsigned int* shift) {
  unsigned long long a = (unsigned long long)p;
  *shift = (unsigned int)(a & 3ull) * 8u;
  return (unsigned int*)(a & ~3ull);
}
TLX_DEV void tlx_atomic_or_narrow(void* p, unsigned int v, unsigned int mask) {
  unsigned int sh; unsigned int* w = tlx_word_of(p, &sh); atomicOr(w, (v & mask) << sh);
}
TLX_DEV void tlx_atomic_and_narrow(void* p, unsigned int v, unsigned int mask) {
  unsigned int sh; unsigned int* w = tlx_word_of(p, &sh); atomicAnd(w, ((v & mask) << sh) | ~(mask << sh));
}
TLX_DEV void tlx_atomic_xor_narrow(void* p, unsigned int v, unsigned int mask) {
  unsigned int sh; unsigned int* w = tlx_word_of(p, &sh); atomicXor(w, (v & mask) << sh);
}

// T.atomic_load / T.atomic_store of 32/64-bit elements at GPU scope, through generic addresses
// (global or shared). seq_cst is a fence.sc before an acquire load or a relaxed store, the PTX
// memory model's mapping of C++: release/acquire alone would allow store buffering.
TLX_DEV void tlx_fence_sc() { asm volatile("fence.sc.gpu;" ::: "memory"); }
TLX_DEV tlx_u32 tlx_ld_relaxed_32(const void* p) {
  tlx_u32 v; asm volatile("ld.relaxed.gpu.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); return v;
}
TLX_DEV tlx_u32 tlx_ld_acquire_32(const void* p) {
  tlx_u32 v; asm volatile("ld.acquire.gpu.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); return v;
}
TLX_DEV tlx_u32 tlx_ld_seq_cst_32(const void* p) { tlx_fence_sc(); return tlx_ld_acquire_32(p); }
TLX_DEV tlx_u64 tlx_ld_relaxed_64(const void* p) {
  tlx_u64 v; asm volatile("ld.relaxed.gpu.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); return v;
}
TLX_DEV tlx_u64 tlx_ld_acquire_64(const void* p) {
  tlx_u64 v; asm volatile("ld.acquire.gpu.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); return v;
}
TLX_DEV tlx_u64 tlx_ld_seq_cst_64(const void* p) { tlx_fence_sc(); return tlx_ld_acquire_64(p); }
TLX_DEV void tlx_st_relaxed_32(void* p, tlx_u32 v) {
  asm volatile("st.relaxed.gpu.b32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
TLX_DEV void tlx_st_release_32(void* p, tlx_u32 v) {
  asm volatile("st.release.gpu.b32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
TLX_DEV void tlx_st_seq_cst_32(void* p, tlx_u32 v) { tlx_fence_sc(); tlx_st_relaxed_32(p, v); }
TLX_DEV void tlx_st_relaxed_64(void* p, tlx_u64 v) {
  asm volatile("st.relaxed.gpu.b64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
TLX_DEV void tlx_st_release_64(void* p, tlx_u64 v) {
  asm volatile("st.release.gpu.b64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
TLX_DEV void tlx_st_seq_cst_64(void* p, tlx_u64 v) { tlx_fence_sc(); tlx_st_relaxed_64(p, v); }
