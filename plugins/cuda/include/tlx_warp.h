// tlx_warp.h -- warp reductions for T.warp_reduce_*: a butterfly of __shfl_xor_sync (xor 16, 8, 4,
// 2, 1), after which every lane holds the same value. Included only by kernels that use them.
#define TLX_WARP_REDUCE(NAME, T, COMBINE)                                                     \
  TLX_DEV T NAME(T v) {                                                                       \
    for (int m = 16; m > 0; m >>= 1) { T o = __shfl_xor_sync(0xffffffffu, v, m, 32); v = COMBINE; } \
    return v;                                                                                 \
  }
#define TLX_WARP_REDUCE_INT(T)                                  \
  TLX_WARP_REDUCE(tlx_warp_sum, T, v + o)                       \
  TLX_WARP_REDUCE(tlx_warp_max, T, (o > v ? o : v))             \
  TLX_WARP_REDUCE(tlx_warp_min, T, (o < v ? o : v))             \
  TLX_WARP_REDUCE(tlx_warp_bitand, T, v & o)                    \
  TLX_WARP_REDUCE(tlx_warp_bitor, T, v | o)
TLX_WARP_REDUCE_INT(int)
TLX_WARP_REDUCE_INT(unsigned int)
TLX_WARP_REDUCE_INT(long long)
TLX_WARP_REDUCE_INT(unsigned long long)
TLX_WARP_REDUCE(tlx_warp_sum, float, v + o)
TLX_WARP_REDUCE(tlx_warp_max, float, fmaxf(v, o))
TLX_WARP_REDUCE(tlx_warp_min, float, fminf(v, o))
TLX_WARP_REDUCE(tlx_warp_sum, double, v + o)
TLX_WARP_REDUCE(tlx_warp_max, double, fmax(v, o))
TLX_WARP_REDUCE(tlx_warp_min, double, fmin(v, o))
