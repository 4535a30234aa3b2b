// The levels of a system's rows on the device, for the fast start in level order
// (gsparse.kernels.sptrsv.natural): level[r] = 0 for a row with no dependency, else 1 + the
// largest level of its dependencies. The rows go in natural order as in natural.cuh: warps take
// tickets of 32 positions from one counter (tickets.cuh), a lane per position (row k top down for a lower
// system, row n - 1 - k bottom up for an upper one), and each dependency's level is polled until
// it is set (level starts at -1 everywhere). A level is its own signal, as x is in the solve:
// nothing else is published with it, so relaxed loads and stores suffice. The argument that the
// solve cannot deadlock (natural.cuh) holds word for word: every dependency of a position lies at
// an earlier position, and tickets go out in order, only to running warps.

namespace gs {
namespace sptrsv {

__device__ __forceinline__ int poll_level(const int* p) {
    int v;
    asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ void store_level(int* p, int v) {
    asm volatile("st.relaxed.gpu.global.s32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void run_levels(const I* __restrict__ crow, const I* __restrict__ col, int* level,
                                           unsigned long long* ticket, I n) {
    const int lane = threadIdx.x % 32;
    const unsigned long long tickets = (n + 31) / 32;
    for (unsigned long long t; take_ticket(ticket, tickets, t);) {
        const I k = (I)t * 32 + lane;
        if (k < n) {
            const I r = LOWER ? k : n - 1 - k;
            int deepest = -1;
            for (I p = crow[r]; p < crow[r + 1]; ++p) {
                const I j = col[p];
                if (j == r) continue;  // the diagonal (absent with a unit diagonal)
                int lj = poll_level(level + j);
                while (lj < 0) lj = poll_level(level + j);
                deepest = lj > deepest ? lj : deepest;
            }
            store_level(level + r, deepest + 1);
        }
        __syncwarp();
    }
}

}  // namespace sptrsv
}  // namespace gs
