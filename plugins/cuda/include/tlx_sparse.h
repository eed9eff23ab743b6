// tilelang-x: 2:4 structured-sparse MMA (T.gemm_sp), sm_80 and later.
// Sparse A 16x32 (kept values 16x16, the dense m16n8k16 A fragment), B 32x8 as two k16 halves,
// fp32 accumulators; e: this thread's metadata word, sparsity selector 0 (lanes 4g and 4g+1 of
// each quad supply it: bits 0-15 row g, bits 16-31 row g+8, lane 4g columns 0-15, lane 4g+1 16-31).
TLX_DEV tlx_u32 tlx_sp_meta(tlx_u32 lo, tlx_u32 hi) {
  unsigned short a, b;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(a) : "r"(lo));
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(b) : "r"(hi));
  return (tlx_u32)a | ((tlx_u32)b << 16);
}
TLX_DEV void tlx_mma_sp_f16(float* c, const tlx_u32* a, const tlx_u32* b0, const tlx_u32* b1, tlx_u32 e) {
  asm volatile("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
               "{%8,%9,%10,%11}, {%0,%1,%2,%3}, %12, 0x0;"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0[0]), "r"(b0[1]), "r"(b1[0]), "r"(b1[1]), "r"(e));
}
TLX_DEV void tlx_mma_sp_bf16(float* c, const tlx_u32* a, const tlx_u32* b0, const tlx_u32* b1, tlx_u32 e) {
  asm volatile("mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
               "{%8,%9,%10,%11}, {%0,%1,%2,%3}, %12, 0x0;"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0[0]), "r"(b0[1]), "r"(b1[0]), "r"(b1[1]), "r"(e));
}
