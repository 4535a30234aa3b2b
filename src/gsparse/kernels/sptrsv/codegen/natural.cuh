// The fast start's solve (gsparse.kernels.sptrsv.natural): rows in natural dependency order, no
// analysis. Positions are those of solve.cuh without reordering (row k top down for a lower
// system, row n - 1 - k bottom up for an upper one), so every dependency of a position lies at
// an earlier position. The warps of the grid take tickets from one counter; ticket t is the
// ROWS positions from t * ROWS, solved by the warp with solve.cuh's row paths (a row per lane,
// or each row shared by the warp). x starts as SENTINEL and every dependency outside the row's
// own lane (or, for shared rows, before the ticket) is polled by value until it is solved.
// With SUBWARPS > 1 each subwarp of W lanes takes tickets of its own, as a warp would: a warp
// has that many tickets in flight.
//
// Why this cannot deadlock, whatever the grid's size and the order in which its blocks start:
// tickets are handed out in increasing order, and only to a subwarp that is running and has
// finished its previous ticket. Suppose some ticket never completes; take the smallest, t. Its
// rows wait only on earlier positions: those of tickets below t, each held by a subwarp that
// took it while running and completes it (t is the smallest that does not), or earlier
// positions of ticket t itself. Inside the ticket a shared row's predecessors were solved by
// the same subwarp before it (program order), and a lane's row waits on other lanes' rows at
// earlier positions, which by induction on the position finish (the lanes of a warp, and so
// its subwarps, progress independently from sm_70 on, as solve.cuh's per-thread rows already
// rely on). So ticket t completes: a contradiction. Nothing here waits for a block that has
// not started: a ticket is only ever held by a running subwarp.
//
// The tickets and their counter's reset are tickets.cuh's.
//
// next_x, where the plan passes one (small systems, NaturalPlan), is the next solve's x: each
// taker, once no ticket is left, sets its share of it to SENTINEL, so that the next solve needs
// no fill kernel of its own before it. Nothing reads next_x in this launch.

namespace gs {
namespace sptrsv {

__device__ __forceinline__ void run_natural(const System& sys, unsigned long long* ticket, T* next_x) {
    const int lane = threadIdx.x % W;
    const int sub = threadIdx.x % 32 / W;
    const unsigned mask = (FULL_MASK >> (32 - W)) << (sub * W);  // this subwarp's lanes
    const Entries in{nullptr, nullptr, 0, false};
    const unsigned long long tickets = (sys.n + ROWS - 1) / ROWS;
    for (unsigned long long t; take_ticket<W>(ticket, tickets, t);) {
        const I first = (I)t * ROWS;
        const I last = first + ROWS < sys.n ? first + ROWS : sys.n;
        if constexpr (PER_THREAD_ROWS) per_thread_rows(sys, in, first, last, true, lane);
        else shared_rows(sys, in, first, last, true, lane, mask);
        __syncwarp(mask);  // the lanes that solved rows of their own join the next ticket's shuffle
    }
    if (next_x != nullptr) {
        const long long takers = (long long)gridDim.x * NW * (32 / W);
        const long long taker = ((long long)blockIdx.x * NW + threadIdx.x / 32) * (32 / W) + sub;
        for (long long e = taker * W + lane; e < (long long)sys.n * K; e += takers * W) {
            *reinterpret_cast<decltype(to_bits(T(0)))*>(next_x + e) = SENTINEL;
        }
    }
}

// The same in a grid of one block (ONE_BLOCK, X_IN_SHARED): the ticket counter and a copy of x
// live in the block's shared memory (`shared`: two 8-byte words, then x as [n, K]), set here
// (the counter to zero, x to SENTINEL) before any subwarp takes a ticket; rows poll their
// dependencies there. The argument above holds as it is: every warp of the block is running.
__device__ __forceinline__ void run_natural_one_block(System sys, unsigned char* shared) {
    auto* ticket = reinterpret_cast<unsigned long long*>(shared);
    T* xs = reinterpret_cast<T*>(shared + 2 * sizeof(unsigned long long));
    if (threadIdx.x < 2) ticket[threadIdx.x] = 0;
    for (long long e = threadIdx.x; e < (long long)sys.n * K; e += blockDim.x) store_shared_bits(xs + e, SENTINEL);
    __syncthreads();
    sys.xs = xs;
    run_natural(sys, ticket, nullptr);
}

}  // namespace sptrsv
}  // namespace gs
