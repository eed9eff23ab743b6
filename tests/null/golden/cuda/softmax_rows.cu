extern "C" __global__ void __launch_bounds__(128) main_kernel(const tlx_half* __restrict__ X, tlx_half* __restrict__ Y) {
  const int tx = threadIdx.x;
  const int bx = blockIdx.x;
  float x[8];
  float row_max[1];
  float row_sum[1];
  tlx_ldv(&X[(((bx * 4) + ((tx >> 5) & 3)) * 256) + (((tx & 31) * 8) + 0)], true, &x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &x[6], &x[7]);
  {  // reduce
    float red_2[1];
    #pragma unroll
    for (int u_3 = 0; u_3 < 1; ++u_3) {
      red_2[u_3] = -__int_as_float(0x7f800000);
    }
    #pragma unroll
    for (int v_4 = 0; v_4 < 8; ++v_4) {
      red_2[0] = fmaxf(red_2[0], x[v_4]);
    }
    #pragma unroll
    for (int u_3 = 0; u_3 < 1; ++u_3) {
      red_2[u_3] = fmaxf(red_2[u_3], tlx_shfl_xor(red_2[u_3], 1));
    }
    #pragma unroll
    for (int u_3 = 0; u_3 < 1; ++u_3) {
      red_2[u_3] = fmaxf(red_2[u_3], tlx_shfl_xor(red_2[u_3], 2));
    }
    #pragma unroll
    for (int u_3 = 0; u_3 < 1; ++u_3) {
      red_2[u_3] = fmaxf(red_2[u_3], tlx_shfl_xor(red_2[u_3], 4));
    }
    #pragma unroll
    for (int u_3 = 0; u_3 < 1; ++u_3) {
      red_2[u_3] = fmaxf(red_2[u_3], tlx_shfl_xor(red_2[u_3], 8));
    }
    #pragma unroll
    for (int u_3 = 0; u_3 < 1; ++u_3) {
      red_2[u_3] = fmaxf(red_2[u_3], tlx_shfl_xor(red_2[u_3], 16));
    }
    #pragma unroll
    for (int u_3 = 0; u_3 < 1; ++u_3) {
      row_max[u_3] = red_2[u_3];
    }
  }
  {  // parallel
    #pragma unroll
    for (int v_5 = 0; v_5 < 8; ++v_5) {
      x[v_5 & 7] = expf(x[v_5 & 7] - row_max[0]);
    }
  }
  {  // reduce
    float red_6[1];
    #pragma unroll
    for (int u_7 = 0; u_7 < 1; ++u_7) {
      red_6[u_7] = 0.0f;
    }
    #pragma unroll
    for (int v_8 = 0; v_8 < 8; ++v_8) {
      red_6[0] = red_6[0] + x[v_8];
    }
    #pragma unroll
    for (int u_7 = 0; u_7 < 1; ++u_7) {
      red_6[u_7] = red_6[u_7] + tlx_shfl_xor(red_6[u_7], 1);
    }
    #pragma unroll
    for (int u_7 = 0; u_7 < 1; ++u_7) {
      red_6[u_7] = red_6[u_7] + tlx_shfl_xor(red_6[u_7], 2);
    }
    #pragma unroll
    for (int u_7 = 0; u_7 < 1; ++u_7) {
      red_6[u_7] = red_6[u_7] + tlx_shfl_xor(red_6[u_7], 4);
    }
    #pragma unroll
    for (int u_7 = 0; u_7 < 1; ++u_7) {
      red_6[u_7] = red_6[u_7] + tlx_shfl_xor(red_6[u_7], 8);
    }
    #pragma unroll
    for (int u_7 = 0; u_7 < 1; ++u_7) {
      red_6[u_7] = red_6[u_7] + tlx_shfl_xor(red_6[u_7], 16);
    }
    #pragma unroll
    for (int u_7 = 0; u_7 < 1; ++u_7) {
      row_sum[u_7] = red_6[u_7];
    }
  }
  {  // parallel
    #pragma unroll
    for (int v_9 = 0; v_9 < 8; ++v_9) {
      x[v_9 & 7] = tlx_div_rcp(x[v_9 & 7], row_sum[0], __frcp_rn(row_sum[0]));
    }
  }
  tlx_st8(&Y[(((bx * 4) + ((tx >> 5) & 3)) * 256) + (((tx & 31) * 8) + 0)], x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]);
}
