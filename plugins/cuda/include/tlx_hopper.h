// tlx_hopper.h -- sm_90a additions to tlx_cuda.h: mbarrier, TMA, wgmma, setmaxnreg, proxy fences.
// Inlined after tlx_cuda.h into kernels that use the Hopper path. PTX forms: backends.md A4-A7.
// The wgmma calls themselves (one per shape) are generated next to the kernel (hopper_header.py).
struct __align__(64) tlx_tmap { unsigned long long v[16]; };

// ---- mbarrier (A4) --------------------------------------------------------------------------------
TLX_DEV void tlx_mbar_init(tlx_u32 bar, tlx_u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
TLX_DEV void tlx_mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
TLX_DEV void tlx_mbar_expect_tx(tlx_u32 bar, tlx_u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
TLX_DEV void tlx_mbar_arrive(tlx_u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
// The arrival of the thread whose `idx` is 0 only, predicated so that the warp stays converged.
TLX_DEV void tlx_mbar_arrive(tlx_u32 bar, tlx_u32 idx) {
  asm volatile("{\n .reg .pred P;\n setp.eq.u32 P, %1, 0;\n @P mbarrier.arrive.shared::cta.b64 _, [%0];\n}"
               :: "r"(bar), "r"(idx) : "memory");
}
TLX_DEV void tlx_mbar_wait(tlx_u32 bar, tlx_u32 parity) {
  asm volatile("{\n .reg .pred P;\n TLX_W:\n mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n"
               " @!P bra TLX_W;\n}" :: "r"(bar), "r"(parity) : "memory");
}

// ---- TMA (A5): coordinates innermost first; the map is a __grid_constant__ parameter -------------
#define TLX_TMA_HEAD "cp.async.bulk.tensor."
#define TLX_TMA_TAIL ".shared::cluster.global.mbarrier::complete_tx::bytes"
TLX_DEV void tlx_tma_load_1d(tlx_u32 dst, const tlx_tmap& m, tlx_u32 bar, int c0) {
  asm volatile(TLX_TMA_HEAD "1d" TLX_TMA_TAIL " [%0], [%1, {%3}], [%2];"
               :: "r"(dst), "l"((tlx_u64)&m), "r"(bar), "r"(c0) : "memory");
}
TLX_DEV void tlx_tma_load_2d(tlx_u32 dst, const tlx_tmap& m, tlx_u32 bar, int c0, int c1) {
  asm volatile(TLX_TMA_HEAD "2d" TLX_TMA_TAIL " [%0], [%1, {%3, %4}], [%2];"
               :: "r"(dst), "l"((tlx_u64)&m), "r"(bar), "r"(c0), "r"(c1) : "memory");
}
TLX_DEV void tlx_tma_load_3d(tlx_u32 dst, const tlx_tmap& m, tlx_u32 bar, int c0, int c1, int c2) {
  asm volatile(TLX_TMA_HEAD "3d" TLX_TMA_TAIL " [%0], [%1, {%3, %4, %5}], [%2];"
               :: "r"(dst), "l"((tlx_u64)&m), "r"(bar), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
TLX_DEV void tlx_tma_load_4d(tlx_u32 dst, const tlx_tmap& m, tlx_u32 bar, int c0, int c1, int c2, int c3) {
  asm volatile(TLX_TMA_HEAD "4d" TLX_TMA_TAIL " [%0], [%1, {%3, %4, %5, %6}], [%2];"
               :: "r"(dst), "l"((tlx_u64)&m), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
TLX_DEV void tlx_tma_load_5d(tlx_u32 dst, const tlx_tmap& m, tlx_u32 bar, int c0, int c1, int c2, int c3, int c4) {
  asm volatile(TLX_TMA_HEAD "5d" TLX_TMA_TAIL " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];"
               :: "r"(dst), "l"((tlx_u64)&m), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4) : "memory");
}
TLX_DEV void tlx_tma_prefetch(const tlx_tmap& m) {
  asm volatile("prefetch.tensormap [%0];" :: "l"((tlx_u64)&m) : "memory");
}

// ---- TMA stores (A5): shared -> global, bulk groups of the issuing thread ------------------------
// Out-of-range elements of the box are clipped by the copy engine. wait_readN returns once all but
// the newest N committed groups have read their shared source: needed before it is written again
// and before the block exits.
#define TLX_TMA_STORE_TAIL ".global.shared::cta.bulk_group"
TLX_DEV void tlx_tma_store_2d(const tlx_tmap& m, tlx_u32 src, int c0, int c1) {
  asm volatile(TLX_TMA_HEAD "2d" TLX_TMA_STORE_TAIL " [%0, {%2, %3}], [%1];"
               :: "l"((tlx_u64)&m), "r"(src), "r"(c0), "r"(c1) : "memory");
}
TLX_DEV void tlx_tma_store_3d(const tlx_tmap& m, tlx_u32 src, int c0, int c1, int c2) {
  asm volatile(TLX_TMA_HEAD "3d" TLX_TMA_STORE_TAIL " [%0, {%2, %3, %4}], [%1];"
               :: "l"((tlx_u64)&m), "r"(src), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
TLX_DEV void tlx_tma_store_4d(const tlx_tmap& m, tlx_u32 src, int c0, int c1, int c2, int c3) {
  asm volatile(TLX_TMA_HEAD "4d" TLX_TMA_STORE_TAIL " [%0, {%2, %3, %4, %5}], [%1];"
               :: "l"((tlx_u64)&m), "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
TLX_DEV void tlx_tma_store_5d(const tlx_tmap& m, tlx_u32 src, int c0, int c1, int c2, int c3, int c4) {
  asm volatile(TLX_TMA_HEAD "5d" TLX_TMA_STORE_TAIL " [%0, {%2, %3, %4, %5, %6}], [%1];"
               :: "l"((tlx_u64)&m), "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4) : "memory");
}
// TMA reductions (lower/tma_reduce.py): the box in shared memory added into the tensor, element
// type from the map; the same bulk groups as the stores (commit, wait_group.read)
#define TLX_TMA_RED_TAIL ".global.shared::cta.add.tile.bulk_group"
TLX_DEV void tlx_tma_reduce_add_2d(const tlx_tmap& m, tlx_u32 src, int c0, int c1) {
  asm volatile("cp.reduce.async.bulk.tensor.2d" TLX_TMA_RED_TAIL " [%0, {%2, %3}], [%1];"
               :: "l"((tlx_u64)&m), "r"(src), "r"(c0), "r"(c1) : "memory");
}
TLX_DEV void tlx_tma_reduce_add_3d(const tlx_tmap& m, tlx_u32 src, int c0, int c1, int c2) {
  asm volatile("cp.reduce.async.bulk.tensor.3d" TLX_TMA_RED_TAIL " [%0, {%2, %3, %4}], [%1];"
               :: "l"((tlx_u64)&m), "r"(src), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
TLX_DEV void tlx_tma_reduce_add_4d(const tlx_tmap& m, tlx_u32 src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.reduce.async.bulk.tensor.4d" TLX_TMA_RED_TAIL " [%0, {%2, %3, %4, %5}], [%1];"
               :: "l"((tlx_u64)&m), "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
TLX_DEV void tlx_tma_reduce_add_5d(const tlx_tmap& m, tlx_u32 src, int c0, int c1, int c2, int c3, int c4) {
  asm volatile("cp.reduce.async.bulk.tensor.5d" TLX_TMA_RED_TAIL " [%0, {%2, %3, %4, %5, %6}], [%1];"
               :: "l"((tlx_u64)&m), "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4) : "memory");
}
TLX_DEV void tlx_tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
TLX_DEV void tlx_tma_store_wait_read0() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
TLX_DEV void tlx_tma_store_wait_read1() { asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); }

// ---- ordering (A7) --------------------------------------------------------------------------------
TLX_DEV void tlx_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
TLX_DEV void tlx_named_bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(n) : "memory"); }
// ping-pong of two consumer warpgroups (hopper/pingpong.py): warpgroup wg waits for its turn on
// named barrier 2 + wg and hands the turn over on the other one's (bar.arrive does not wait)
TLX_DEV void tlx_pp_wait(int wg) { asm volatile("bar.sync %0, 256;" :: "r"(2 + wg) : "memory"); }
TLX_DEV void tlx_pp_pass(int wg) { asm volatile("bar.arrive %0, 256;" :: "r"(3 - wg) : "memory"); }
#define TLX_SETMAXNREG_INC(n) asm volatile("setmaxnreg.inc.sync.aligned.u32 " #n ";" ::: "memory")
#define TLX_SETMAXNREG_DEC(n) asm volatile("setmaxnreg.dec.sync.aligned.u32 " #n ";" ::: "memory")

// ---- wgmma (A6) -----------------------------------------------------------------------------------
TLX_DEV void tlx_wgmma_arrive() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
TLX_DEV void tlx_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
TLX_DEV void tlx_wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
#define TLX_WGMMA_WAIT(n) asm volatile("wgmma.wait_group.sync.aligned " #n ";" ::: "memory")
// The B^T registers of a swapped wgmma (lower/gemm_wgmma.py) from the N-major B tile: the columns
// n, n+1 (lo) and n+2, n+3 (hi) a thread gathers, of one row k (float32 bits: wgmma truncates them
// to TF32, as it does reading shared memory) or of rows k .. k+3 (p0 .. p3; 8-bit, row k in the
// lowest byte, transposed by byte permutes).
TLX_DEV void tlx_ld_b32x2(tlx_u32* lo, const float* p) {
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  lo[0] = v.x;
  lo[1] = v.y;
}
TLX_DEV void tlx_ld_b32x4(tlx_u32* lo, tlx_u32* hi, const float* p) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  lo[0] = v.x;
  lo[1] = v.y;
  hi[0] = v.z;
  hi[1] = v.w;
}
TLX_DEV void tlx_ld_b2x4t(tlx_u32* lo, const void* p0, const void* p1, const void* p2, const void* p3) {
  const tlx_u32 t0 = __byte_perm(*(const unsigned short*)p0, *(const unsigned short*)p1, 0x5140);
  const tlx_u32 t2 = __byte_perm(*(const unsigned short*)p2, *(const unsigned short*)p3, 0x5140);
  lo[0] = __byte_perm(t0, t2, 0x5410);
  lo[1] = __byte_perm(t0, t2, 0x7632);
}
TLX_DEV void tlx_ld_b4x4t(tlx_u32* lo, tlx_u32* hi, const void* p0, const void* p1, const void* p2, const void* p3) {
  const tlx_u32 w0 = *(const tlx_u32*)p0, w1 = *(const tlx_u32*)p1, w2 = *(const tlx_u32*)p2, w3 = *(const tlx_u32*)p3;
  const tlx_u32 t0 = __byte_perm(w0, w1, 0x5140), t1 = __byte_perm(w0, w1, 0x7362);
  const tlx_u32 t2 = __byte_perm(w2, w3, 0x5140), t3 = __byte_perm(w2, w3, 0x7362);
  lo[0] = __byte_perm(t0, t2, 0x5410);
  lo[1] = __byte_perm(t0, t2, 0x7632);
  hi[0] = __byte_perm(t1, t3, 0x5410);
  hi[1] = __byte_perm(t1, t3, 0x7632);
}
// Keeps the compiler from moving accumulator reads/writes across the asynchronous wgmma.
TLX_DEV void tlx_fence_regs(float* d, int n) {
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
TLX_DEV void tlx_fence_regs(int* d, int n) {  // int32 accumulators of an 8-bit integer gemm
#pragma unroll
  for (int i = 0; i < n; ++i) asm volatile("" : "+r"(d[i]) :: "memory");
}
// ptxas places a wgmma.wait_group as early as register dependences allow, even above independent
// work meant to overlap the group (the softmax during P.V, hopper/rotate.py); it does not move the
// wait above a shared store, so the values feed stores behind a branch no thread takes (the
// compiler cannot see that no thread index is 0xffffffff): what computes them stays before the wait.
TLX_DEV void tlx_sched_pin(const float* v, int n) {
  tlx_u32 t;
  asm("mov.u32 %0, %%tid.x;" : "=r"(t));
  if (t == 0xffffffffu) {
#pragma unroll
    for (int i = 0; i < n; ++i) asm volatile("st.shared.f32 [%0], %1;" :: "r"(4 * i), "f"(v[i]) : "memory");
  }
}
// Shared-memory matrix descriptor: start>>4 | LBO>>4 << 16 | SBO>>4 << 32 | swizzle mode << 62, of
// the address base + off. Written as (fields of base) + off>>4 on the low word, so that the calls
// of one gemm share everything but one add: shared addresses stay under 256 KB, so the 14-bit start
// field does not carry (base and off are multiples of 16).
TLX_DEV tlx_u64 tlx_wgmma_desc(tlx_u32 base, tlx_u32 off, tlx_u32 lbo, tlx_u32 sbo, tlx_u32 mode) {
  const tlx_u32 lo = (((base & 0x3FFFFu) >> 4) | (((lbo >> 4) & 0x3FFFu) << 16)) + (off >> 4);
  const tlx_u32 hi = ((sbo >> 4) & 0x3FFFu) | (mode << 30);
  return ((tlx_u64)hi << 32) | lo;
}

// ---- stream-K (hopper/stream_k.py): a segment's partial sum in its block's workspace slot --------
// The workspace starts with TLX_SK_FLAG_WORDS flags, one per block (zero between launches), and
// slot q follows them, holding float4 v of consumer thread t at [v * threads + t]. The flags sit at
// the same place for every kernel, so the stream-K kernels of one stream share a workspace
// (runtime._workspace) without one's partial sums landing on another's flags.
#define TLX_SK_FLAG_WORDS 1024
TLX_DEV unsigned* tlx_sk_flags(float* ws) { return reinterpret_cast<unsigned*>(ws); }
TLX_DEV float* tlx_sk_slot(float* ws, int slot, int n, int threads) {
  return ws + TLX_SK_FLAG_WORDS + (size_t)slot * n * threads;
}
TLX_DEV void tlx_sk_store(float* acc, int n, float* ws, int slot, int threads) {
  float4* dst = reinterpret_cast<float4*>(tlx_sk_slot(ws, slot, n, threads)) + threadIdx.x;
#pragma unroll
  for (int v = 0; v < n / 4; ++v)
    __stcg(dst + v * threads, make_float4(acc[4 * v], acc[4 * v + 1], acc[4 * v + 2], acc[4 * v + 3]));
  __threadfence();
  tlx_named_bar_sync(1, threads);
  if (threadIdx.x == 0)
    asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(tlx_sk_flags(ws) + slot), "r"(1u) : "memory");
}
// Adds slots first..last (each flagged by its block) and clears their flags.
TLX_DEV void tlx_sk_add(float* acc, int n, float* ws, int first, int last, int threads) {
  unsigned* flags = tlx_sk_flags(ws);
  for (int q = first; q <= last; ++q) {
    if (threadIdx.x == 0) {
      unsigned f;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(f) : "l"(flags + q) : "memory");
      } while (f == 0u);
      flags[q] = 0u;
    }
    __syncwarp();  // warp 0 whole again before the aligned barrier
    tlx_named_bar_sync(1, threads);
    const float4* src = reinterpret_cast<const float4*>(tlx_sk_slot(ws, q, n, threads)) + threadIdx.x;
#pragma unroll
    for (int v = 0; v < n / 4; ++v) {
      const float4 p = __ldcg(src + v * threads);
      acc[4 * v] += p.x;
      acc[4 * v + 1] += p.y;
      acc[4 * v + 2] += p.z;
      acc[4 * v + 3] += p.w;
    }
  }
}

// ---- thread-block clusters (hopper/multicast.py): ranks, cluster barrier, multicast TMA loads -----
// This CTA's coordinate along one cluster axis, from its rank (x fastest: rank = x + cx*(y + cy*z)):
// (rank / stride) % extent. Not volatile: the compiler may reuse one read of the rank.
TLX_DEV int tlx_cluster_coord(tlx_u32 stride, tlx_u32 extent) {
  tlx_u32 r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return (int)((r / stride) % extent);
}
// Every thread of every CTA of the cluster: after mbarrier inits (their fence releases them, so the
// arrive can be relaxed) and before exit (release: remote arrives are done before a peer may exit).
TLX_DEV void tlx_cluster_sync_init() {
  asm volatile("barrier.cluster.arrive.relaxed;\n barrier.cluster.wait;" ::: "memory");
}
TLX_DEV void tlx_cluster_sync() { asm volatile("barrier.cluster.arrive;\n barrier.cluster.wait;" ::: "memory"); }
// A consumer thread releases a stage to the CTAs of `peers` (a ctaMask of the cluster's `size` CTAs:
// those that multicast into this CTA), so every barrier gets one arrival per consumer thread of
// each peer.
TLX_DEV void tlx_mbar_arrive_peers(tlx_u32 bar, tlx_u32 peers, tlx_u32 size) {
  #pragma unroll
  for (tlx_u32 r = 0; r < 16; ++r) {
    if (r < size && ((peers >> r) & 1u)) {
      tlx_u32 remote;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(r));
      asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" :: "r"(remote) : "memory");
    }
  }
}
// The thread whose `idx` is r arrives on peer r's barrier (r < size, in `peers`), predicated.
TLX_DEV void tlx_mbar_arrive_peers(tlx_u32 bar, tlx_u32 peers, tlx_u32 size, tlx_u32 idx) {
  const tlx_u32 on = idx < size ? (peers >> idx) & 1u : 0u;
  tlx_u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(idx < size ? idx : 0u));
  asm volatile("{\n .reg .pred P;\n setp.ne.u32 P, %1, 0;\n @P mbarrier.arrive.shared::cluster.b64 _, [%0];\n}"
               :: "r"(remote), "r"(on) : "memory");
}
// A TMA load written to the same offsets in every CTA of `mask`, each one's barrier at the offset of
// `bar` receiving the bytes.
#define TLX_TMA_MC_TAIL ".shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
TLX_DEV void tlx_tma_load_mc_2d(tlx_u32 dst, const tlx_tmap& m, tlx_u32 bar, tlx_u32 mask, int c0, int c1) {
  asm volatile(TLX_TMA_HEAD "2d" TLX_TMA_MC_TAIL " [%0], [%1, {%4, %5}], [%2], %3;"
               :: "r"(dst), "l"((tlx_u64)&m), "r"(bar), "h"((unsigned short)mask), "r"(c0), "r"(c1) : "memory");
}
TLX_DEV void tlx_tma_load_mc_3d(tlx_u32 dst, const tlx_tmap& m, tlx_u32 bar, tlx_u32 mask, int c0, int c1, int c2) {
  asm volatile(TLX_TMA_HEAD "3d" TLX_TMA_MC_TAIL " [%0], [%1, {%4, %5, %6}], [%2], %3;"
               :: "r"(dst), "l"((tlx_u64)&m), "r"(bar), "h"((unsigned short)mask), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
TLX_DEV void tlx_tma_load_mc_4d(tlx_u32 dst, const tlx_tmap& m, tlx_u32 bar, tlx_u32 mask, int c0, int c1, int c2,
                                int c3) {
  asm volatile(TLX_TMA_HEAD "4d" TLX_TMA_MC_TAIL " [%0], [%1, {%4, %5, %6, %7}], [%2], %3;"
               :: "r"(dst), "l"((tlx_u64)&m), "r"(bar), "h"((unsigned short)mask), "r"(c0), "r"(c1), "r"(c2),
                  "r"(c3) : "memory");
}
TLX_DEV void tlx_tma_load_mc_5d(tlx_u32 dst, const tlx_tmap& m, tlx_u32 bar, tlx_u32 mask, int c0, int c1, int c2,
                                int c3, int c4) {
  asm volatile(TLX_TMA_HEAD "5d" TLX_TMA_MC_TAIL " [%0], [%1, {%4, %5, %6, %7, %8}], [%2], %3;"
               :: "r"(dst), "l"((tlx_u64)&m), "r"(bar), "h"((unsigned short)mask), "r"(c0), "r"(c1), "r"(c2),
                  "r"(c3), "r"(c4) : "memory");
}
