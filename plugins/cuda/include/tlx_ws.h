// tilelang-x: manual warp specialization (T.ws) and explicit mbarriers (T.alloc_barrier,
// T.barrier_arrive, T.barrier_wait); included only by kernels that use them. sm_80 and later:
// mbarrier init / arrive / test_wait exist since sm_80; sm_90 waits with try_wait and fences the
// mbarrier inits for the async proxy. Every arrive is preceded by fence.proxy.async on sm_90, so
// shared memory written with ordinary stores before the arrive may be read by wgmma after the wait
// (and shared memory wgmma read before it may be overwritten after it).

// The warpgroup (128 threads) of the calling thread.
__device__ __forceinline__ int tlx_ws_wg() { return (int)(threadIdx.x >> 7); }

__device__ __forceinline__ void tlx_ws_bar_init(unsigned int bar, unsigned int count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}

// After the inits (made by one thread), before the block barrier that publishes them.
__device__ __forceinline__ void tlx_ws_bar_fence_init() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

__device__ __forceinline__ void tlx_ws_arrive(unsigned int bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
  asm volatile("{\n .reg .b64 tlx_state;\n mbarrier.arrive.shared.b64 tlx_state, [%0];\n}" :: "r"(bar) : "memory");
}

// Returns once the phase of parity `parity` (0 or 1) of the barrier has completed.
__device__ __forceinline__ void tlx_ws_wait(unsigned int bar, unsigned int parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n .reg .pred P;\n TLX_WS_W:\n mbarrier.try_wait.parity.shared.b64 P, [%0], %1;\n"
               " @!P bra TLX_WS_W;\n}" :: "r"(bar), "r"(parity & 1u) : "memory");
#else
  asm volatile("{\n .reg .pred P;\n TLX_WS_W:\n mbarrier.test_wait.parity.shared.b64 P, [%0], %1;\n"
               " @!P bra TLX_WS_W;\n}" :: "r"(bar), "r"(parity & 1u) : "memory");
#endif
}

// The barrier of one warpgroup's threads (named barrier `id`, 1..15; 0 is __syncthreads), with the
// proxy fence wgmma needs after ordinary stores to shared memory (as before __syncthreads on sm_90a).
__device__ __forceinline__ void tlx_ws_sync(int id, int threads) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}

// The kernel's own transaction counts and proxy fences (T.mbarrier_expect_tx,
// T.mbarrier_arrive_expect_tx, T.tma_copy, T.fence_proxy_async: lower/tma_copy.py). Transaction
// counts exist from sm_90 on; the backend emits the expect calls only there.
__device__ __forceinline__ void tlx_ws_expect_tx(unsigned int bar, unsigned int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
#endif
}

__device__ __forceinline__ void tlx_ws_arrive_expect_tx(unsigned int bar, unsigned int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
#endif
}

__device__ __forceinline__ void tlx_ws_fence_proxy_async() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// T.tma_store_wait(N, read): the calling thread's TMA store groups but the N newest have read their
// shared tiles (READ) or also written the tensor.
template <int N, bool READ>
__device__ __forceinline__ void tlx_ws_bulk_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (READ) {
    asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
  } else {
    asm volatile("cp.async.bulk.wait_group %0;" :: "n"(N) : "memory");
  }
#endif
}
