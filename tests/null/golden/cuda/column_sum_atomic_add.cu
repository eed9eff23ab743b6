extern "C" __global__ void __launch_bounds__(128) main_kernel(const float* __restrict__ X, float* __restrict__ S) {
  extern __shared__ __align__(1024) unsigned char tlx_smem[];
  const tlx_u32 tlx_smem_base = tlx_smem_addr(tlx_smem);
  const int tx = threadIdx.x;
  const int bx = blockIdx.x;
  const int by = blockIdx.y;
  float* red_ws_5 = (float*)(tlx_smem + 0);
  const tlx_u32 red_ws_5_s = tlx_smem_base + 0;
  float tile[8];
  float partial[4];
  {  // parallel
    #pragma unroll
    for (int vg_1 = 0; vg_1 < 2; ++vg_1) {
      tlx_ldv(&X[(((by * 32) + (((((vg_1 * 4) >> 2) & 1) * 16) + ((tx >> 3) & 15))) * 100) + ((bx * 32) + (((tx & 7) * 4) + ((vg_1 * 4) & 3)))], (((by * 32) + (((((vg_1 * 4) >> 2) & 1) * 16) + ((tx >> 3) & 15))) < 200) && (((bx * 32) + (((tx & 7) * 4) + ((vg_1 * 4) & 3))) < 100), &tile[((((vg_1 * 4) >> 2) & 1) * 4) + ((vg_1 * 4) & 3)], &tile[(((((vg_1 * 4) + 1) >> 2) & 1) * 4) + (((vg_1 * 4) + 1) & 3)], &tile[(((((vg_1 * 4) + 2) >> 2) & 1) * 4) + (((vg_1 * 4) + 2) & 3)], &tile[(((((vg_1 * 4) + 3) >> 2) & 1) * 4) + (((vg_1 * 4) + 3) & 3)]);
    }
  }
  {  // reduce
    float red_2[4];
    #pragma unroll
    for (int u_3 = 0; u_3 < 4; ++u_3) {
      red_2[u_3] = 0.0f;
    }
    #pragma unroll
    for (int v_4 = 0; v_4 < 8; ++v_4) {
      red_2[v_4 & 3] = red_2[v_4 & 3] + tile[v_4];
    }
    __syncthreads();
    #pragma unroll
    for (int u_6 = 0; u_6 < 4; ++u_6) {
      red_ws_5[0 + ((u_6 * 128) + tx)] = red_2[u_6];
    }
    __syncthreads();
    #pragma unroll
    for (int u_6 = 0; u_6 < 4; ++u_6) {
      float acc_8[1];
      acc_8[0] = 0.0f;
      #pragma unroll
      for (int k_7 = 0; k_7 < 16; ++k_7) {
        acc_8[0] = acc_8[0] + red_ws_5[0 + (((u_6 * 128) + (tx - (((tx >> 3) & 15) * 8))) + (k_7 * 8))];
      }
      red_2[u_6] = acc_8[0];
    }
    #pragma unroll
    for (int u_3 = 0; u_3 < 4; ++u_3) {
      partial[u_3] = red_2[u_3];
    }
  }
  {  // parallel
    #pragma unroll
    for (int v_9 = 0; v_9 < 4; ++v_9) {
      if (((bx * 32) + (((tx & 7) * 4) + (v_9 & 3))) < 100) {
        if (((tx >> 3) & 15) == 0) {
          atomicAdd(&S[(bx * 32) + (((tx & 7) * 4) + (v_9 & 3))], partial[v_9 & 3]);
        }
      }
    }
  }
}
