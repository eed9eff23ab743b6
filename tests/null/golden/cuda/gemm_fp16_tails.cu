extern "C" __global__ void __launch_bounds__(128) main_kernel(const tlx_half* __restrict__ A, const tlx_half* __restrict__ B, tlx_half* __restrict__ C) {
  extern __shared__ __align__(1024) unsigned char tlx_smem[];
  const tlx_u32 tlx_smem_base = tlx_smem_addr(tlx_smem);
  const int tx = threadIdx.x;
  const int bx = blockIdx.x;
  const int by = blockIdx.y;
  tlx_half* A_shared = (tlx_half*)(tlx_smem + 0);
  const tlx_u32 A_shared_s = tlx_smem_base + 0;
  tlx_half* B_shared = (tlx_half*)(tlx_smem + 12288);
  const tlx_u32 B_shared_s = tlx_smem_base + 12288;
  float C_local[32];
  {  // parallel
    #pragma unroll
    for (int v_1 = 0; v_1 < 32; ++v_1) {
      C_local[(((((v_1 >> 4) & 1) * 16) + (((v_1 >> 1) & 1) * 2)) + (((v_1 >> 2) & 3) * 4)) + (v_1 & 1)] = 0.0f;
    }
  }
  if (true) {
    {  // copy
      #pragma unroll
      for (int c_2 = 0; c_2 < 2; ++c_2) {
        tlx_cp_async16(A_shared_s + ((((0 + ((c_2 * 32) + (tx >> 2))) * 32) + (((tx & 3) * 8) & -32)) + ((((tx & 3) * 8) & 31) ^ (((((c_2 * 32) + (tx >> 2)) >> 1) & 3) * 8))) * 2, &A[(((by * 64) + ((c_2 * 32) + (tx >> 2))) * 96) + ((0 * 32) + ((tx & 3) * 8))], true && (((by * 64) + ((c_2 * 32) + (tx >> 2))) < 200));
      }
    }
    {  // copy
      #pragma unroll
      for (int c_3 = 0; c_3 < 2; ++c_3) {
        tlx_cp_async16(B_shared_s + ((((0 + ((c_3 * 16) + (tx >> 3))) * 64) + (((tx & 7) * 8) & -64)) + ((((tx & 7) * 8) & 63) ^ ((((c_3 * 16) + (tx >> 3)) & 7) * 8))) * 2, &B[(((0 * 32) + ((c_3 * 16) + (tx >> 3))) * 136) + ((bx * 64) + ((tx & 7) * 8))], true && (((bx * 64) + ((tx & 7) * 8)) < 136));
      }
    }
  }
  tlx_cp_async_commit();
  if (true) {
    {  // copy
      #pragma unroll
      for (int c_4 = 0; c_4 < 2; ++c_4) {
        tlx_cp_async16(A_shared_s + ((((64 + ((c_4 * 32) + (tx >> 2))) * 32) + (((tx & 3) * 8) & -32)) + ((((tx & 3) * 8) & 31) ^ (((((c_4 * 32) + (tx >> 2)) >> 1) & 3) * 8))) * 2, &A[(((by * 64) + ((c_4 * 32) + (tx >> 2))) * 96) + ((1 * 32) + ((tx & 3) * 8))], true && (((by * 64) + ((c_4 * 32) + (tx >> 2))) < 200));
      }
    }
    {  // copy
      #pragma unroll
      for (int c_5 = 0; c_5 < 2; ++c_5) {
        tlx_cp_async16(B_shared_s + ((((32 + ((c_5 * 16) + (tx >> 3))) * 64) + (((tx & 7) * 8) & -64)) + ((((tx & 7) * 8) & 63) ^ ((((c_5 * 16) + (tx >> 3)) & 7) * 8))) * 2, &B[(((1 * 32) + ((c_5 * 16) + (tx >> 3))) * 136) + ((bx * 64) + ((tx & 7) * 8))], true && (((bx * 64) + ((tx & 7) * 8)) < 136));
      }
    }
  }
  tlx_cp_async_commit();
  tlx_u32 a_frag_6[16];
  tlx_u32 b_frag_7[16];
  TLX_CP_ASYNC_WAIT(1);
  __syncthreads();
  {  // gemm
    #pragma unroll
    for (int mi_18 = 0; mi_18 < 2; ++mi_18) {
      tlx_ldsm_x4(&a_frag_6[mi_18 * 4], A_shared_s + ((((((0 + ((int)((unsigned)(0) % (unsigned)(3)))) * 64) + (((((tx >> 5) >> 1) * 32) + (mi_18 * 16)) + ((tx & 31) & 15))) * 32) + ((0 + (((tx & 31) >> 4) * 8)) & -32)) + (((0 + (((tx & 31) >> 4) * 8)) & 31) ^ ((((((((tx >> 5) >> 1) * 32) + (mi_18 * 16)) + ((tx & 31) & 15)) >> 1) & 3) * 8))) * 2);
    }
    #pragma unroll
    for (int nj_19 = 0; nj_19 < 2; ++nj_19) {
      tlx_ldsm_x4_t(&b_frag_7[nj_19 * 4], B_shared_s + ((((((0 + ((int)((unsigned)(0) % (unsigned)(3)))) * 32) + (0 + ((tx & 31) & 15))) * 64) + ((((((tx >> 5) & 1) * 32) + (nj_19 * 16)) + (((tx & 31) >> 4) * 8)) & -64)) + (((((((tx >> 5) & 1) * 32) + (nj_19 * 16)) + (((tx & 31) >> 4) * 8)) & 63) ^ (((0 + ((tx & 31) & 15)) & 7) * 8))) * 2);
    }
  }
  for (int ko_i = 0; ko_i < 3; ++ko_i) {
    {  // gemm
      #pragma unroll
      for (int mi_10 = 0; mi_10 < 2; ++mi_10) {
        tlx_ldsm_x4(&a_frag_6[8 + (mi_10 * 4)], A_shared_s + ((((((0 + ((int)((unsigned)(ko_i) % (unsigned)(3)))) * 64) + (((((tx >> 5) >> 1) * 32) + (mi_10 * 16)) + ((tx & 31) & 15))) * 32) + ((16 + (((tx & 31) >> 4) * 8)) & -32)) + (((16 + (((tx & 31) >> 4) * 8)) & 31) ^ ((((((((tx >> 5) >> 1) * 32) + (mi_10 * 16)) + ((tx & 31) & 15)) >> 1) & 3) * 8))) * 2);
      }
      #pragma unroll
      for (int nj_11 = 0; nj_11 < 2; ++nj_11) {
        tlx_ldsm_x4_t(&b_frag_7[8 + (nj_11 * 4)], B_shared_s + ((((((0 + ((int)((unsigned)(ko_i) % (unsigned)(3)))) * 32) + (16 + ((tx & 31) & 15))) * 64) + ((((((tx >> 5) & 1) * 32) + (nj_11 * 16)) + (((tx & 31) >> 4) * 8)) & -64)) + (((((((tx >> 5) & 1) * 32) + (nj_11 * 16)) + (((tx & 31) >> 4) * 8)) & 63) ^ (((16 + ((tx & 31) & 15)) & 7) * 8))) * 2);
      }
    }
    {  // copy
      #pragma unroll
      for (int c_8 = 0; c_8 < 2; ++c_8) {
        tlx_cp_async16(A_shared_s + ((((((0 + ((int)((unsigned)((ko_i + 2)) % (unsigned)(3)))) * 64) + ((c_8 * 32) + (tx >> 2))) * 32) + (((tx & 3) * 8) & -32)) + ((((tx & 3) * 8) & 31) ^ (((((c_8 * 32) + (tx >> 2)) >> 1) & 3) * 8))) * 2, &A[(((by * 64) + ((c_8 * 32) + (tx >> 2))) * 96) + (((0 + min((ko_i + 2), 2)) * 32) + ((tx & 3) * 8))], true && (((by * 64) + ((c_8 * 32) + (tx >> 2))) < 200));
      }
    }
    {  // copy
      #pragma unroll
      for (int c_9 = 0; c_9 < 2; ++c_9) {
        tlx_cp_async16(B_shared_s + ((((((0 + ((int)((unsigned)((ko_i + 2)) % (unsigned)(3)))) * 32) + ((c_9 * 16) + (tx >> 3))) * 64) + (((tx & 7) * 8) & -64)) + ((((tx & 7) * 8) & 63) ^ ((((c_9 * 16) + (tx >> 3)) & 7) * 8))) * 2, &B[((((0 + min((ko_i + 2), 2)) * 32) + ((c_9 * 16) + (tx >> 3))) * 136) + ((bx * 64) + ((tx & 7) * 8))], true && (((bx * 64) + ((tx & 7) * 8)) < 136));
      }
    }
    tlx_cp_async_commit();
    {  // gemm
      #pragma unroll
      for (int mi_12 = 0; mi_12 < 2; ++mi_12) {
        #pragma unroll
        for (int ni_13 = 0; ni_13 < 4; ++ni_13) {
          tlx_mma_f16(&C_local[((mi_12 * 4) + ni_13) * 4], &a_frag_6[mi_12 * 4], &b_frag_7[ni_13 * 2]);
        }
      }
    }
    TLX_CP_ASYNC_WAIT(1);
    __syncthreads();
    {  // gemm
      #pragma unroll
      for (int mi_14 = 0; mi_14 < 2; ++mi_14) {
        tlx_ldsm_x4(&a_frag_6[mi_14 * 4], A_shared_s + ((((((0 + ((int)((unsigned)((ko_i + 1)) % (unsigned)(3)))) * 64) + (((((tx >> 5) >> 1) * 32) + (mi_14 * 16)) + ((tx & 31) & 15))) * 32) + ((0 + (((tx & 31) >> 4) * 8)) & -32)) + (((0 + (((tx & 31) >> 4) * 8)) & 31) ^ ((((((((tx >> 5) >> 1) * 32) + (mi_14 * 16)) + ((tx & 31) & 15)) >> 1) & 3) * 8))) * 2);
      }
      #pragma unroll
      for (int nj_15 = 0; nj_15 < 2; ++nj_15) {
        tlx_ldsm_x4_t(&b_frag_7[nj_15 * 4], B_shared_s + ((((((0 + ((int)((unsigned)((ko_i + 1)) % (unsigned)(3)))) * 32) + (0 + ((tx & 31) & 15))) * 64) + ((((((tx >> 5) & 1) * 32) + (nj_15 * 16)) + (((tx & 31) >> 4) * 8)) & -64)) + (((((((tx >> 5) & 1) * 32) + (nj_15 * 16)) + (((tx & 31) >> 4) * 8)) & 63) ^ (((0 + ((tx & 31) & 15)) & 7) * 8))) * 2);
      }
    }
    {  // gemm
      #pragma unroll
      for (int mi_16 = 0; mi_16 < 2; ++mi_16) {
        #pragma unroll
        for (int ni_17 = 0; ni_17 < 4; ++ni_17) {
          tlx_mma_f16(&C_local[((mi_16 * 4) + ni_17) * 4], &a_frag_6[8 + (mi_16 * 4)], &b_frag_7[8 + (ni_17 * 2)]);
        }
      }
    }
  }
  TLX_CP_ASYNC_WAIT(0);
  {  // parallel
    #pragma unroll
    for (int vg_20 = 0; vg_20 < 16; ++vg_20) {
      if ((((by * 64) + ((((((tx >> 6) & 1) * 32) + ((((vg_20 * 2) >> 4) & 1) * 16)) + ((((vg_20 * 2) >> 1) & 1) * 8)) + ((tx >> 2) & 7))) < 200) && (((bx * 64) + ((((((tx >> 5) & 1) * 32) + ((((vg_20 * 2) >> 2) & 3) * 8)) + ((tx & 3) * 2)) + ((vg_20 * 2) & 1))) < 136)) {
        tlx_st2(&C[(((by * 64) + ((((((tx >> 6) & 1) * 32) + ((((vg_20 * 2) >> 4) & 1) * 16)) + ((((vg_20 * 2) >> 1) & 1) * 8)) + ((tx >> 2) & 7))) * 136) + ((bx * 64) + ((((((tx >> 5) & 1) * 32) + ((((vg_20 * 2) >> 2) & 3) * 8)) + ((tx & 3) * 2)) + ((vg_20 * 2) & 1)))], C_local[((((((vg_20 * 2) >> 4) & 1) * 16) + ((((vg_20 * 2) >> 1) & 1) * 2)) + ((((vg_20 * 2) >> 2) & 3) * 4)) + ((vg_20 * 2) & 1)], C_local[(((((((vg_20 * 2) + 1) >> 4) & 1) * 16) + (((((vg_20 * 2) + 1) >> 1) & 1) * 2)) + (((((vg_20 * 2) + 1) >> 2) & 3) * 4)) + (((vg_20 * 2) + 1) & 1)]);
      }
    }
  }
}
