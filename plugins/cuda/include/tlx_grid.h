// tilelang-x: synchronization beyond one block (included only by kernels that use it).

// T.sync_grid(): every block of a cooperative launch waits here for all the others, on a counter
// word the runtime keeps per device and stream (zero when allocated). Block (0, 0, 0) adds
// 0x80000000 - (blocks - 1), every other block 1: one barrier's arrivals add 0x80000000 in all, so
// the top bit flips exactly when the last block arrives, and the low bits are zero again for the
// next barrier (of this kernel or of the next one on the stream).
__device__ __forceinline__ void tlx_grid_sync(unsigned int* counter) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
    const unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
    const bool first = blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
    const unsigned int add = first ? 0x80000000u - (blocks - 1u) : 1u;
    __threadfence();
    const unsigned int old = atomicAdd(counter, add);
    unsigned int now;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(counter) : "memory");
    } while (((old ^ now) & 0x80000000u) == 0u);
  }
  __syncthreads();
}

// T.pdl_trigger() / T.pdl_sync(): programmatic dependent launch (sm_90+; nothing before).
__device__ __forceinline__ void tlx_pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void tlx_pdl_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
