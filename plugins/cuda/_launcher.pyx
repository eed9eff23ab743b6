# cython: language_level=3, boundscheck=True, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled fast path of the CUDA launcher (optional; ``runtime.py`` has a ctypes twin).

Built at install time when Cython and a C compiler are present. It needs no CUDA toolkit: the
few driver entry points it calls are declared here and their addresses are handed over by
``runtime.py`` (which opened ``libcuda.so.1`` with ctypes), see ``bind_driver``.

Per call it reads each tensor's device and data pointer, converts scalars into preallocated
parameter slots (a TMA tensor map: its cached 128-byte encoding), evaluates the grid (integer
programs run here, other grids call Python), asks torch for the device's current stream and calls
``cuLaunchKernel``. Anything unusual (a non-tensor, a CPU tensor, tensors on two devices, a
non-contiguous tensor, a tensor TMA cannot describe, a failed launch) is handed to the Python
callbacks, which raise the user-facing error or switch to the fallback launcher.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

ctypedef int CUresult
ctypedef void* CUfunction
ctypedef void* CUcontext
ctypedef void* CUstream

ctypedef CUresult (*launch_fn_t)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                                 unsigned int, unsigned int, unsigned int, CUstream, void**, void**) noexcept nogil
ctypedef CUresult (*ctx_get_fn_t)(CUcontext*) noexcept nogil
ctypedef CUresult (*ctx_push_fn_t)(CUcontext) noexcept nogil
ctypedef CUresult (*ctx_pop_fn_t)(CUcontext*) noexcept nogil

cdef launch_fn_t _cuLaunchKernel = NULL
cdef ctx_get_fn_t _cuCtxGetCurrent = NULL
cdef ctx_push_fn_t _cuCtxPushCurrent = NULL
cdef ctx_pop_fn_t _cuCtxPopCurrent = NULL
cdef int _min_device = 0  # -1: CPU tensors pass the device check (benchmarks with a fake driver)

# Parameter codes (same numbering as runtime.py's CODES).
cdef enum:
    C_PTR = 0
    C_I8 = 1
    C_I16 = 2
    C_I32 = 3
    C_I64 = 4
    C_F32 = 5
    C_F64 = 6
    C_F16 = 7
    C_BF16 = 8
    C_U64 = 9
    C_TMAP = 10
    TMAP_BYTES = 128

# Grid program opcodes (same numbering as runtime.py's GRID_OPS).
cdef enum:
    G_CONST = 0
    G_DIM = 1
    G_ADD = 2
    G_SUB = 3
    G_MUL = 4
    G_FLOORDIV = 5
    G_MOD = 6
    G_MIN = 7
    G_MAX = 8
    G_STACK = 16


def bind_driver(uintptr_t launch, uintptr_t ctx_get, uintptr_t ctx_push, uintptr_t ctx_pop):
    """Hand over the addresses of cuLaunchKernel, cuCtxGetCurrent, cuCtxPushCurrent_v2, cuCtxPopCurrent_v2."""
    global _cuLaunchKernel, _cuCtxGetCurrent, _cuCtxPushCurrent, _cuCtxPopCurrent
    _cuLaunchKernel = <launch_fn_t><void*>launch
    _cuCtxGetCurrent = <ctx_get_fn_t><void*>ctx_get
    _cuCtxPushCurrent = <ctx_push_fn_t><void*>ctx_push
    _cuCtxPopCurrent = <ctx_pop_fn_t><void*>ctx_pop


def _accept_host_tensors(bint accept):
    """Let CPU tensors through the device check (``bench/launch_overhead.py --fake-driver`` times
    the launch path on them against a no-op driver); never for real launches."""
    global _min_device
    _min_device = -1 if accept else 0


def is_bound():
    """Whether ``bind_driver`` was called."""
    return _cuLaunchKernel != NULL


def bound_addresses():
    """The four addresses ``bind_driver`` was given (zeros before it was called)."""
    return (<uintptr_t><void*>_cuLaunchKernel, <uintptr_t><void*>_cuCtxGetCurrent,
            <uintptr_t><void*>_cuCtxPushCurrent, <uintptr_t><void*>_cuCtxPopCurrent)


cdef inline uint16_t _f32_to_bf16(float x) noexcept:
    cdef uint32_t bits = 0
    memcpy(&bits, &x, 4)
    if (bits & 0x7F800000u) == 0x7F800000u and (bits & 0x007FFFFFu) != 0:
        return <uint16_t>((bits >> 16) | 0x40)  # keep NaN a NaN
    bits += 0x7FFFu + ((bits >> 16) & 1u)  # round to nearest even
    return <uint16_t>(bits >> 16)


# Grid operands beyond this go to the Python grid function (so int64 never overflows).
cdef int64_t GRID_LIMIT = (<int64_t>1) << 40
cdef int64_t MUL_LIMIT = (<int64_t>1) << 22  # one factor at most this: |product| < 2**62


cdef class Launcher:
    """``launcher(args, dims=())``: launch the kernel on the tensors' device and current stream.

    ``launch_on(device, args, dims)`` is the entry for callers that checked the tensors already
    (``JITKernel``'s argument binder): ``device`` is theirs, ``dims`` a tuple ordered like
    ``dim_names``.
    """

    cdef int n
    cdef uint64_t* slots
    cdef void** ptrs
    cdef int* codes
    cdef int* from_dims
    cdef uint64_t* align_masks
    cdef Py_ssize_t* index
    cdef char* tmap_raw
    cdef int nbuf
    cdef bint check_args
    cdef unsigned int last_grid[3]
    cdef CUstream last_stream
    cdef dict dim_pos
    cdef object dim_position
    cdef Py_ssize_t ndims
    cdef unsigned int gx, gy, gz, bx, by, bz, smem
    cdef bint static_grid
    cdef int64_t* gprog
    cdef int goff[4]
    cdef object grid_fn
    cdef object resolve
    cdef object get_stream
    cdef object diagnose
    cdef object launch_error
    cdef object half_bits
    cdef object default_device
    cdef object dims_list
    cdef object tma_map
    cdef object use_fallback
    cdef dict tmap_cache
    cdef int cur_dev
    cdef CUfunction cur_fn
    cdef CUcontext cur_ctx
    cdef readonly object meta
    cdef readonly object kernel
    cdef readonly tuple dim_names

    def __cinit__(self):
        self.slots = NULL
        self.ptrs = NULL
        self.codes = NULL
        self.from_dims = NULL
        self.align_masks = NULL
        self.index = NULL
        self.tmap_raw = NULL
        self.gprog = NULL

    def __init__(self, kernel, plan, helper, bint check_args=True):
        """``kernel``: runtime.LoadedKernel; ``plan``: runtime._Plan; ``helper``: runtime._Helper."""
        cdef list codes = plan.codes, from_dims = plan.from_dims, index = plan.index
        grid_static = plan.grid_static
        cdef int i, k, ntmap = 0
        cdef char* base
        self.kernel = kernel
        self.meta = kernel.meta
        meta = kernel.meta
        self.resolve = kernel.resolve
        self.n = len(codes)
        self.nbuf = len(plan.buf_args)
        cdef int n = self.n if self.n > 0 else 1
        self.slots = <uint64_t*>malloc(n * sizeof(uint64_t))
        self.ptrs = <void**>malloc(n * sizeof(void*))
        self.codes = <int*>malloc(n * sizeof(int))
        self.from_dims = <int*>malloc(n * sizeof(int))
        self.index = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.align_masks = <uint64_t*>malloc(n * sizeof(uint64_t))
        if not (self.slots and self.ptrs and self.codes and self.from_dims and self.index and self.align_masks):
            raise MemoryError()
        for i in range(self.n):
            if codes[i] == C_TMAP:
                ntmap += 1
        if ntmap:
            self.tmap_raw = <char*>malloc(ntmap * TMAP_BYTES + 64)
            if not self.tmap_raw:
                raise MemoryError()
            memset(self.tmap_raw, 0, ntmap * TMAP_BYTES + 64)
        base = <char*>((<uintptr_t>self.tmap_raw + 63) // 64 * 64)  # CUtensorMap is 64-byte aligned
        k = 0
        for i in range(self.n):
            self.slots[i] = 0
            self.codes[i] = codes[i]
            self.from_dims[i] = from_dims[i]
            self.index[i] = index[i]
            self.align_masks[i] = plan.align_masks[i]
            if codes[i] == C_TMAP:
                self.ptrs[i] = <void*>(base + TMAP_BYTES * k)
                k += 1
            else:
                self.ptrs[i] = <void*>&self.slots[i]
        self.tmap_cache = {}
        self.check_args = check_args
        self.last_stream = NULL
        self.last_grid[0] = self.last_grid[1] = self.last_grid[2] = 0
        self.dim_pos = helper.positions
        self.dim_position = helper.dim_position
        self.ndims = len(meta.dims)
        self.dim_names = tuple(meta.dims)
        block = meta.block
        self.bx, self.by, self.bz = block[0], block[1], block[2]
        self.smem = meta.smem_bytes
        self.static_grid = grid_static is not None
        if self.static_grid:
            self.gx, self.gy, self.gz = grid_static[0], grid_static[1], grid_static[2]
        self.grid_fn = plan.grid_fn
        self._set_grid_program(plan.grid_program)
        self.get_stream = helper.get_stream
        self.diagnose = helper.diagnose
        self.launch_error = helper.launch_error
        self.half_bits = helper.half_bits
        self.default_device = helper.default_device
        self.dims_list = helper.dims_list
        self.tma_map = getattr(helper, "tma_map", None)
        self.use_fallback = getattr(helper, "use_fallback", None)
        self.cur_dev = -1
        self.cur_fn = NULL
        self.cur_ctx = NULL

    cdef _set_grid_program(self, program):
        """``program``: three lists of ``(opcode, operand)`` (see runtime.grid_program), or None."""
        cdef int axis, k = 0, total = 0
        self.goff[0] = self.goff[1] = self.goff[2] = self.goff[3] = 0
        if program is None or self.static_grid:
            return
        for axis in range(3):
            total += len(program[axis])
        self.gprog = <int64_t*>malloc((2 * total if total > 0 else 1) * sizeof(int64_t))
        if not self.gprog:
            raise MemoryError()
        for axis in range(3):
            self.goff[axis] = k
            for op, arg in program[axis]:
                self.gprog[k] = op
                self.gprog[k + 1] = arg
                k += 2
        self.goff[3] = k

    def __dealloc__(self):
        free(self.slots)
        free(self.ptrs)
        free(self.codes)
        free(self.from_dims)
        free(self.index)
        free(self.align_masks)
        free(self.tmap_raw)
        free(self.gprog)

    cdef int _bind_device(self, int dev) except -1:
        fn, ctx = self.resolve(dev)
        self.cur_fn = <CUfunction><uintptr_t>fn
        self.cur_ctx = <CUcontext><uintptr_t>ctx
        self.cur_dev = dev
        return 0

    cdef list _dims_from_dict(self, dict dims):
        cdef list out = [None] * self.ndims
        cdef Py_ssize_t p
        for k, v in dims.items():
            pos = self.dim_pos.get(k)
            if pos is None:
                pos = self.dim_position(k)
            p = pos
            if p >= 0:
                out[p] = v
        return out

    cdef int _run_grid(self, object dims, unsigned int* g) except -1:
        """The grid from the integer program; 0 when it must come from the Python function
        (no program, a division by zero, operands too large)."""
        cdef int64_t stack[G_STACK]
        cdef int sp, axis, k
        cdef int64_t op, a, b, q
        if self.gprog == NULL:
            return 0
        for axis in range(3):
            sp = 0
            for k in range(self.goff[axis], self.goff[axis + 1], 2):
                op = self.gprog[k]
                if op == G_CONST:
                    stack[sp] = self.gprog[k + 1]
                    sp += 1
                    continue
                if op == G_DIM:
                    a = <int64_t>dims[self.gprog[k + 1]]
                    if a > GRID_LIMIT or a < -GRID_LIMIT:
                        return 0
                    stack[sp] = a
                    sp += 1
                    continue
                sp -= 1
                b = stack[sp]
                a = stack[sp - 1]
                if op == G_ADD:
                    a = a + b
                elif op == G_SUB:
                    a = a - b
                elif op == G_MUL:
                    if (a > MUL_LIMIT or a < -MUL_LIMIT) and (b > MUL_LIMIT or b < -MUL_LIMIT):
                        return 0
                    a = a * b
                elif op == G_FLOORDIV or op == G_MOD:
                    if b == 0:
                        return 0
                    q = a / b
                    if q * b != a and ((a < 0) != (b < 0)):
                        q -= 1  # floor, as Python's //
                    a = q if op == G_FLOORDIV else a - q * b
                elif op == G_MIN:
                    a = a if a < b else b
                else:
                    a = a if a > b else b
                if a > GRID_LIMIT or a < -GRID_LIMIT:
                    return 0
                stack[sp - 1] = a
            a = stack[0]
            if a > 0xFFFFFFFF:
                return 0
            g[axis] = <unsigned int>a if a > 0 else 1
        return 1

    def _launch_repeat(self, int n):
        """Launch ``n`` more times with the last call's arguments, grid and stream, straight from C
        (no Python work): the driver's own cost per launch, for benchmarks."""
        cdef int i
        cdef CUcontext cur = NULL
        cdef CUcontext popped = NULL
        cdef CUresult res = 0
        if self.cur_fn == NULL:
            raise RuntimeError("call the launcher once first")
        _cuCtxGetCurrent(&cur)
        if cur != self.cur_ctx:
            _cuCtxPushCurrent(self.cur_ctx)
        with nogil:
            for i in range(n):
                res = _cuLaunchKernel(self.cur_fn, self.last_grid[0], self.last_grid[1], self.last_grid[2],
                                      self.bx, self.by, self.bz, self.smem, self.last_stream, self.ptrs, NULL)
                if res != 0:
                    break
        if cur != self.cur_ctx:
            _cuCtxPopCurrent(&popped)
        if res != 0:
            self.launch_error(res, self.cur_dev, tuple(self.last_grid))

    def __call__(self, args, dims=()):
        if dims is None or not dims:
            dims = ()
        elif type(dims) is dict:
            dims = self._dims_from_dict(<dict>dims)
        elif type(dims) is not tuple and type(dims) is not list:
            dims = self.dims_list(dims)
        return self._run(args, dims, -1, False, self.check_args)

    def launch_on(self, int device, args, tuple dims):
        """Launch on ``device`` with ``dims`` ordered like ``dim_names``, reading no tensor's device
        and checking no contiguity: for callers that checked both (every tensor on ``device``)."""
        return self._run(args, dims, device, True, False)

    cdef object _run(self, object args, object dims, int dev, bint given, bint check):
        cdef int i, code, d
        cdef CUstream stream
        cdef object a, t, m
        cdef double fv
        cdef float f32
        cdef unsigned int g[3]
        cdef CUcontext cur = NULL
        cdef CUcontext popped = NULL
        cdef CUresult res
        cdef const char* mp
        cdef bint bad = False
        cdef bint first = True
        if _cuLaunchKernel == NULL:
            raise RuntimeError("tilelang_x CUDA launcher used before bind_driver()")
        try:
            for i in range(self.n):
                code = self.codes[i]
                if code == C_PTR or code == C_TMAP:
                    t = args[self.index[i]]
                    if not given and (first or check):
                        d = t.get_device()
                        if first:
                            dev = d
                            first = False
                        if d < _min_device or d != dev or (check and code == C_PTR and not t.is_contiguous()):
                            bad = True
                            break
                    if code == C_PTR:
                        self.slots[i] = <uint64_t>t.data_ptr()
                        if self.slots[i] & self.align_masks[i]:  # the kernel's vector accesses need more
                            bad = True
                            break
                        continue
                    key = (i, t.data_ptr(), t.shape, t.stride())
                    m = self.tmap_cache.get(key)
                    if m is None:
                        m = self.tma_map(i, t)
                        if type(m) is not bytes:
                            return self.use_fallback(args, dims, m)
                        if len(self.tmap_cache) >= 256:
                            self.tmap_cache.clear()
                        self.tmap_cache[key] = m
                    mp = <bytes>m
                    memcpy(self.ptrs[i], mp, TMAP_BYTES)
                    continue
                if self.from_dims[i]:
                    a = dims[self.index[i]]
                else:
                    a = args[self.index[i]]
                if code == C_I32:
                    (<int32_t*>&self.slots[i])[0] = <int32_t>(<int64_t>a)
                elif code == C_I64:
                    self.slots[i] = <uint64_t>(<int64_t>a)
                elif code == C_U64:
                    self.slots[i] = <uint64_t>a
                elif code == C_F32:
                    f32 = <float>(<double>a)
                    memcpy(&self.slots[i], &f32, 4)
                elif code == C_F64:
                    fv = <double>a
                    memcpy(&self.slots[i], &fv, 8)
                elif code == C_I8:
                    (<int8_t*>&self.slots[i])[0] = <int8_t>(<int64_t>a)
                elif code == C_I16:
                    (<int16_t*>&self.slots[i])[0] = <int16_t>(<int64_t>a)
                elif code == C_BF16:
                    (<uint16_t*>&self.slots[i])[0] = _f32_to_bf16(<float>(<double>a))
                elif code == C_F16:
                    (<uint16_t*>&self.slots[i])[0] = <uint16_t>(<int>self.half_bits(a))
            if not bad:
                if self.static_grid:
                    g[0], g[1], g[2] = self.gx, self.gy, self.gz
                elif not self._run_grid(dims, g):
                    gp = self.grid_fn(*dims)
                    g[0] = gp[0] if gp[0] > 0 else 1
                    g[1] = gp[1] if gp[1] > 0 else 1
                    g[2] = gp[2] if gp[2] > 0 else 1
        except (TypeError, ValueError, OverflowError, AttributeError, IndexError):
            self.diagnose(args, dims)
            raise
        if bad:
            self.diagnose(args, dims)
            raise RuntimeError("invalid kernel arguments")  # diagnose always raises first
        if self.nbuf == 0 and not given:
            dev = self.default_device()
        if dev != self.cur_dev:
            self._bind_device(dev)
        stream = <CUstream><uintptr_t>self.get_stream(dev)
        _cuCtxGetCurrent(&cur)
        if cur != self.cur_ctx:
            _cuCtxPushCurrent(self.cur_ctx)
        res = _cuLaunchKernel(self.cur_fn, g[0], g[1], g[2], self.bx, self.by, self.bz, self.smem, stream,
                              self.ptrs, NULL)
        self.last_grid[0] = g[0]
        self.last_grid[1] = g[1]
        self.last_grid[2] = g[2]
        self.last_stream = stream
        if cur != self.cur_ctx:
            _cuCtxPopCurrent(&popped)
        if res != 0:
            self.launch_error(res, dev, (g[0], g[1], g[2]))
        return None
