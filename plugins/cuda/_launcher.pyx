# cython: language_level=3, boundscheck=True, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled fast path of the CUDA launcher (optional; ``runtime.py`` has a ctypes twin).

Built at install time when Cython and a C compiler are present. It needs no CUDA toolkit: the
few driver entry points it calls are declared here and their addresses are handed over by
``runtime.py`` (which opened ``libcuda.so.1`` with ctypes), see ``bind_driver``.

Per call it reads each tensor's device and data pointer, converts scalars into preallocated
parameter slots, asks torch for the device's current stream and calls ``cuLaunchKernel``. Anything
unusual (a non-tensor, a CPU tensor, tensors on two devices, a non-contiguous tensor, a failed
launch) is handed to the Python callbacks, which raise the user-facing error.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

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


def bind_driver(uintptr_t launch, uintptr_t ctx_get, uintptr_t ctx_push, uintptr_t ctx_pop):
    """Hand over the addresses of cuLaunchKernel, cuCtxGetCurrent, cuCtxPushCurrent_v2, cuCtxPopCurrent_v2."""
    global _cuLaunchKernel, _cuCtxGetCurrent, _cuCtxPushCurrent, _cuCtxPopCurrent
    _cuLaunchKernel = <launch_fn_t><void*>launch
    _cuCtxGetCurrent = <ctx_get_fn_t><void*>ctx_get
    _cuCtxPushCurrent = <ctx_push_fn_t><void*>ctx_push
    _cuCtxPopCurrent = <ctx_pop_fn_t><void*>ctx_pop


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


cdef class Launcher:
    """``launcher(args, dims=())``: launch the kernel on the tensors' device and current stream."""

    cdef int n
    cdef uint64_t* slots
    cdef void** ptrs
    cdef int* codes
    cdef int* from_dims
    cdef Py_ssize_t* index
    cdef Py_ssize_t* buf_args  # positions in args of the buffer parameters
    cdef int nbuf
    cdef bint check_args
    cdef unsigned int last_grid[3]
    cdef CUstream last_stream
    cdef dict dim_pos
    cdef object dim_position
    cdef Py_ssize_t ndims
    cdef unsigned int gx, gy, gz, bx, by, bz, smem
    cdef bint static_grid
    cdef object grid_fn
    cdef object resolve
    cdef object get_stream
    cdef object diagnose
    cdef object launch_error
    cdef object half_bits
    cdef object default_device
    cdef object dims_list
    cdef int cur_dev
    cdef CUfunction cur_fn
    cdef CUcontext cur_ctx
    cdef readonly object meta
    cdef readonly object kernel

    def __cinit__(self):
        self.slots = NULL
        self.ptrs = NULL
        self.codes = NULL
        self.from_dims = NULL
        self.index = NULL
        self.buf_args = NULL

    def __init__(self, kernel, plan, helper, bint check_args=True):
        """``kernel``: runtime.LoadedKernel; ``plan``: runtime._Plan; ``helper``: runtime._Helper."""
        cdef list codes = plan.codes, from_dims = plan.from_dims, index = plan.index, buf_args = plan.buf_args
        grid_static = plan.grid_static
        cdef int i
        self.kernel = kernel
        self.meta = kernel.meta
        meta = kernel.meta
        self.resolve = kernel.resolve
        self.n = len(codes)
        self.nbuf = len(buf_args)
        cdef int n = self.n if self.n > 0 else 1
        self.slots = <uint64_t*>malloc(n * sizeof(uint64_t))
        self.ptrs = <void**>malloc(n * sizeof(void*))
        self.codes = <int*>malloc(n * sizeof(int))
        self.from_dims = <int*>malloc(n * sizeof(int))
        self.index = <Py_ssize_t*>malloc(n * sizeof(Py_ssize_t))
        self.buf_args = <Py_ssize_t*>malloc((self.nbuf if self.nbuf > 0 else 1) * sizeof(Py_ssize_t))
        if not (self.slots and self.ptrs and self.codes and self.from_dims and self.index and self.buf_args):
            raise MemoryError()
        for i in range(self.n):
            self.slots[i] = 0
            self.ptrs[i] = <void*>&self.slots[i]
            self.codes[i] = codes[i]
            self.from_dims[i] = from_dims[i]
            self.index[i] = index[i]
        for i in range(self.nbuf):
            self.buf_args[i] = buf_args[i]
        self.check_args = check_args
        self.last_stream = NULL
        self.last_grid[0] = self.last_grid[1] = self.last_grid[2] = 0
        self.dim_pos = helper.positions
        self.dim_position = helper.dim_position
        self.ndims = len(kernel.meta.dims)
        block = meta.block
        self.bx, self.by, self.bz = block[0], block[1], block[2]
        self.smem = meta.smem_bytes
        self.static_grid = grid_static is not None
        if self.static_grid:
            self.gx, self.gy, self.gz = grid_static[0], grid_static[1], grid_static[2]
        self.grid_fn = plan.grid_fn
        self.get_stream = helper.get_stream
        self.diagnose = helper.diagnose
        self.launch_error = helper.launch_error
        self.half_bits = helper.half_bits
        self.default_device = helper.default_device
        self.dims_list = helper.dims_list
        self.cur_dev = -1
        self.cur_fn = NULL
        self.cur_ctx = NULL

    def __dealloc__(self):
        free(self.slots)
        free(self.ptrs)
        free(self.codes)
        free(self.from_dims)
        free(self.index)
        free(self.buf_args)

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
        cdef int i, code, dev = -1, d
        cdef CUstream stream
        cdef object a, t
        cdef double fv
        cdef float f32
        cdef unsigned int gx, gy, gz
        cdef CUcontext cur = NULL
        cdef CUcontext popped = NULL
        cdef CUresult res
        if _cuLaunchKernel == NULL:
            raise RuntimeError("tilelang_x CUDA launcher used before bind_driver()")
        if dims is None or not dims:
            dims = ()
        elif type(dims) is dict:
            dims = self._dims_from_dict(<dict>dims)
        elif type(dims) is not tuple and type(dims) is not list:
            dims = self.dims_list(dims)
        cdef bint bad = False
        cdef bint check = self.check_args
        try:
            for i in range(self.n):
                code = self.codes[i]
                if code == C_PTR:
                    t = args[self.index[i]]
                    if dev < 0 or check:
                        d = t.get_device()
                        if dev < 0:
                            dev = d
                        if d < 0 or d != dev or (check and not t.is_contiguous()):
                            bad = True
                            break
                    self.slots[i] = <uint64_t>t.data_ptr()
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
        except (TypeError, ValueError, OverflowError, AttributeError, IndexError):
            self.diagnose(args, dims)
            raise
        if bad:
            self.diagnose(args, dims)
            raise RuntimeError("invalid kernel arguments")  # diagnose always raises first
        if self.nbuf == 0:
            dev = self.default_device()
        if self.static_grid:
            gx, gy, gz = self.gx, self.gy, self.gz
        else:
            g = self.grid_fn(*dims)
            gx = g[0] if g[0] > 0 else 1
            gy = g[1] if g[1] > 0 else 1
            gz = g[2] if g[2] > 0 else 1
        if dev != self.cur_dev:
            self._bind_device(dev)
        stream = <CUstream><uintptr_t>self.get_stream(dev)
        _cuCtxGetCurrent(&cur)
        if cur != self.cur_ctx:
            _cuCtxPushCurrent(self.cur_ctx)
        res = _cuLaunchKernel(self.cur_fn, gx, gy, gz, self.bx, self.by, self.bz, self.smem, stream,
                              self.ptrs, NULL)
        self.last_grid[0] = gx
        self.last_grid[1] = gy
        self.last_grid[2] = gz
        self.last_stream = stream
        if cur != self.cur_ctx:
            _cuCtxPopCurrent(&popped)
        if res != 0:
            self.launch_error(res, dev, (gx, gy, gz))
