// tlx_elect.h -- T.shuffle_elect: true in one lane of the warp, which every lane executes. sm_90+:
// PTX elect.sync (the lowest lane); earlier: the lowest active lane. Included only by kernels that
// use it.
TLX_DEV bool tlx_elect_one() {
#if __CUDA_ARCH__ >= 900
  unsigned elected;
  asm volatile("{\n\t.reg .pred p;\n\telect.sync _|p, 0xffffffff;\n\tselp.u32 %0, 1, 0, p;\n\t}\n" : "=r"(elected));
  return elected != 0u;
#else
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return (int)lane == __ffs(__activemask()) - 1;
#endif
}
