"""The Hopper (sm_90a) path of the CUDA backend: wgmma (``wgmma_rule``, ``layout``), TMA copies
(``tma``, ``multicast`` in clusters) on mbarrier pipelines with automatic warp specialization
(``pipeline``; ``pingpong`` turns, the FlashAttention ``rotate``, ``persistent`` tile walks),
accumulators stored without their shared staging tile (``direct_store``), and the final rewrites
and header (``finalize``, ``header``); ``stages`` lists the stages ``passes.py`` runs for an sm_90a
target and ``config`` reads the pass configs."""
