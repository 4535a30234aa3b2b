// Helpers of the output-tiled g-SpMM kernel: staging lhs tiles into shared memory (the
// bulk-copy engine on sm_90, asynchronous copies on sm_80), waiting for them, and
// locating each warp's chunk of edge words.
namespace ot {

__device__ __forceinline__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Before the first tile: the two tile buffers' barriers (sm_90), visible to the copy engine.
__device__ __forceinline__ void start(unsigned long long* barriers) {
#if __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n"
                     :: "r"(shared_address(barriers)) : "memory");
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n"
                     :: "r"(shared_address(barriers + 1)) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
#endif
    __syncthreads();
}

// Copies `count` elements of lhs into a tile buffer. sm_90: one thread hands the whole
// aligned part to the bulk-copy engine, which signals the buffer's barrier as the bytes
// land; sm_80: every thread issues 16-byte asynchronous copies. Elements past the last
// whole 16 bytes (all of them when lhs is not 16-byte aligned) are copied by the threads
// one by one, visible after the next barrier.
template <typename T>
__device__ __forceinline__ void stage(T* __restrict__ to, const T* __restrict__ from, long long count,
                                      unsigned long long* barrier) {
    const bool aligned = (reinterpret_cast<unsigned long long>(from) & 15) == 0;
    const long long bytes = aligned ? count * (long long)sizeof(T) / 16 * 16 : 0;
#if __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                     :: "r"(shared_address(barrier)), "r"(static_cast<unsigned>(bytes)) : "memory");
        if (bytes > 0) {
            asm volatile(
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                :: "r"(shared_address(to)), "l"(from), "r"(static_cast<unsigned>(bytes)),
                   "r"(shared_address(barrier))
                : "memory");
        }
    }
#else
    for (long long i = threadIdx.x; i < bytes / 16; i += blockDim.x) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                     :: "r"(shared_address(reinterpret_cast<unsigned char*>(to) + i * 16)),
                        "l"(reinterpret_cast<const unsigned char*>(from) + i * 16)
                     : "memory");
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
    for (long long i = bytes / (long long)sizeof(T) + threadIdx.x; i < count; i += blockDim.x) {
        to[i] = from[i];
    }
}

// Waits until walk step t's tile has landed in this thread's view: its buffer's barrier
// is past the phase of that step (sm_90), or this thread's copies are done (sm_80; the
// next tile's are issued after the barrier that follows).
__device__ __forceinline__ void landed(unsigned long long* barriers, long long t) {
#if __CUDA_ARCH__ >= 900
    const unsigned address = shared_address(barriers + (t & 1));
    const unsigned parity = static_cast<unsigned>((t >> 1) & 1);
    unsigned done = 0;
    do {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(address), "r"(parity) : "memory");
    } while (!done);
#else
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// Lane i loads the bounds of this warp's chunk at walk step first + i (0 past the last):
// the chunk of tile `first_tile + step` is at chunks[tile * warps].
template <typename I>
__device__ __forceinline__ void bounds_batch(const I* __restrict__ chunks, long long first,
                                             long long first_tile, long long steps, int warps,
                                             int lane, long long& lo, long long& hi) {
    lo = hi = 0;
    if (first + lane < steps) {
        const long long at = (first_tile + first + lane) * warps;
        lo = chunks[at];
        hi = chunks[at + 1];
    }
}

// This lane's part of the chunk at words[lo, hi): its first word, the warp's steps, the
// lane's edges (the first n - 32 (steps - 1) lanes walk `steps` edges, the rest one fewer).
__device__ __forceinline__ void split(long long lo, long long hi, int lane,
                                      long long& base, int& steps, int& mine) {
    base = lo;
    const int n = static_cast<int>(hi - lo);
    steps = (n + 31) / 32;
    mine = lane < n - 32 * (steps - 1) ? steps : steps - 1;
}

}  // namespace ot
