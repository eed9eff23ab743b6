// tilelang-x: the barrier of a thread-block cluster and a block's rank in it (cluster_sync.py;
// included only by kernels that use them). With TLX_CLUSTER_LAUNCH (sm_90a, a kernel declared with
// __cluster_dims__) they are PTX's cluster barrier and %cluster_ctarank; without, each block is a
// cluster of its own: the wait is a barrier of the block and the rank is 0.
#ifdef TLX_CLUSTER_LAUNCH
TLX_DEV void tlx_cluster_arrive() { asm volatile("barrier.cluster.arrive.aligned;" ::: "memory"); }
TLX_DEV void tlx_cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
TLX_DEV void tlx_cluster_wait() { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }
TLX_DEV unsigned tlx_cluster_rank() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
#else
TLX_DEV void tlx_cluster_arrive() {}
TLX_DEV void tlx_cluster_arrive_relaxed() {}
TLX_DEV void tlx_cluster_wait() { __syncthreads(); }
TLX_DEV unsigned tlx_cluster_rank() { return 0u; }
#endif
// T.cluster_sync(): arrive, then wait
TLX_DEV void tlx_cluster_barrier() {
  tlx_cluster_arrive();
  tlx_cluster_wait();
}
