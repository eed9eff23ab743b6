// tilelang-x: the barrier of a thread-block cluster, a block's rank in it and arrivals at a peer's
// mbarrier (cluster_sync.py; included only by kernels that use them). With TLX_CLUSTER_LAUNCH
// (sm_90a, a kernel declared with __cluster_dims__) they are PTX's cluster barrier, %cluster_ctarank
// and mapa; without, each block is a cluster of its own: the wait is a barrier of the block, the
// rank is 0 and the peer is the caller.
#ifdef TLX_CLUSTER_LAUNCH
TLX_DEV void tlx_cluster_arrive() { asm volatile("barrier.cluster.arrive.aligned;" ::: "memory"); }
TLX_DEV void tlx_cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
TLX_DEV void tlx_cluster_wait() { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }
TLX_DEV unsigned tlx_cluster_rank() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// T.barrier_arrive(bar, cta_id): the mbarrier at bar's offset in the block of rank cta (release:
// the caller's earlier accesses are visible to the peer's threads after their wait; the proxy fence
// orders its reads of shared tiles before async-proxy writes the peer issues after its wait, as
// tlx_ws_arrive's)
TLX_DEV void tlx_cluster_arrive_remote(unsigned bar, unsigned cta) {
  unsigned remote;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(cta));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(remote) : "memory");
}
#else
TLX_DEV void tlx_cluster_arrive() {}
TLX_DEV void tlx_cluster_arrive_relaxed() {}
TLX_DEV void tlx_cluster_wait() { __syncthreads(); }
TLX_DEV unsigned tlx_cluster_rank() { return 0u; }
TLX_DEV void tlx_cluster_arrive_remote(unsigned bar, unsigned) {  // a cluster of one: cta is 0
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
  asm volatile("{\n .reg .b64 tlx_state;\n mbarrier.arrive.shared.b64 tlx_state, [%0];\n}" :: "r"(bar) : "memory");
}
#endif
// T.cluster_sync(): arrive, then wait
TLX_DEV void tlx_cluster_barrier() {
  tlx_cluster_arrive();
  tlx_cluster_wait();
}
