// tilelang-x: T.rng_rand, Philox4x32-10 (Salmon et al., SC 2011) in plain CUDA C++.
// The same function as core_ir/philox.py: key = the seed's 32-bit halves, counter = (offset / 4
// as two words, subsequence as two words), result = word offset % 4 of the ten-round output.
TLX_DEV tlx_u32 tlx_rng_rand(tlx_u64 seed, tlx_u64 sub, tlx_u64 off) {
  tlx_u32 c0 = (tlx_u32)(off >> 2), c1 = (tlx_u32)(off >> 34), c2 = (tlx_u32)sub, c3 = (tlx_u32)(sub >> 32);
  tlx_u32 k0 = (tlx_u32)seed, k1 = (tlx_u32)(seed >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const tlx_u32 p0_hi = __umulhi(0xD2511F53u, c0), p0_lo = 0xD2511F53u * c0;
    const tlx_u32 p1_hi = __umulhi(0xCD9E8D57u, c2), p1_lo = 0xCD9E8D57u * c2;
    c0 = p1_hi ^ c1 ^ k0; c1 = p1_lo; c2 = p0_hi ^ c3 ^ k1; c3 = p0_lo;
  }
  const tlx_u32 lane = (tlx_u32)(off & 3);
  return lane == 0 ? c0 : lane == 1 ? c1 : lane == 2 ? c2 : c3;
}
