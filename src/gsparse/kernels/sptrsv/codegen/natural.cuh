// The fast start's solve (gsparse.kernels.sptrsv.natural): rows in natural dependency order, no
// analysis. Positions are those of solve.cuh without reordering (row k top down for a lower
// system, row n - 1 - k bottom up for an upper one), so every dependency of a position lies at
// an earlier position. Takers take tickets of consecutive positions from one counter and solve
// them with solve.cuh's row paths; x starts as SENTINEL and a row polls by value every
// dependency that another taker, or another lane, may still be solving.
//
// - Rows a lane solves on its own (PER_THREAD_ROWS): each subwarp of W lanes takes tickets of
//   ROWS positions, lane i solving the ticket's i-th, (i + W)-th, ... positions.
// - Rows a subwarp shares: the warp takes tickets of ROWS positions per subwarp, and subwarp i
//   solves the ticket's i-th, (i + SUBWARPS)-th, ... positions, one after another. Consecutive
//   positions, which often depend on one another, go to subwarps side by side, and a ticket's
//   atomic on the one counter serves all of them. (With a row a subwarp a ticket, tickets of
//   each subwarp's own were up to 1.45x slower on three community factors at 4 and 16
//   right-hand sides; H200, docs/performance.md.)
//
// Why this cannot deadlock, whatever the grid's size and the order in which its blocks start:
// tickets are handed out in increasing order, and only to a taker that is running and has
// finished its previous ticket. Suppose some ticket never completes; take the smallest, t. Its
// rows wait only on earlier positions: those of tickets below t, each held by a taker that
// took it while running and completes it (t is the smallest that does not), or earlier
// positions of ticket t itself, held by the same taker. Those finish by induction on the
// position: a lane's or a subwarp's earlier rows in program order, and other lanes' or
// subwarps' rows on their own, since the lanes of a warp, and so its subwarps, progress
// independently from sm_70 on (as solve.cuh's per-thread rows already rely on). So ticket t
// completes: a contradiction. Nothing here waits for a block that has not started: a ticket is
// only ever held by a running taker.
//
// The tickets and their counter's reset are tickets.cuh's.
//
// next_x, where the plan passes one (small systems, NaturalPlan), is the next solve's x: each
// subwarp, once no ticket is left, sets its share of it to SENTINEL, so that the next solve needs
// no fill kernel of its own before it. Nothing reads next_x in this launch.

namespace gs {
namespace sptrsv {

__device__ __forceinline__ void run_natural(const System& sys, unsigned long long* ticket, T* next_x) {
    const int lane = threadIdx.x % W;
    const int sub = threadIdx.x % 32 / W;
    const unsigned mask = (FULL_MASK >> (32 - W)) << (sub * W);  // this subwarp's lanes
    const Entries in{nullptr, nullptr, 0, false};
    if constexpr (PER_THREAD_ROWS) {
        const unsigned long long tickets = (sys.n + ROWS - 1) / ROWS;
        for (unsigned long long t; take_ticket<W>(ticket, tickets, t);) {
            const I first = (I)t * ROWS;
            const I last = first + ROWS < sys.n ? first + ROWS : sys.n;
            per_thread_rows(sys, in, first, last, true, lane);
            __syncwarp(mask);  // the lanes join the next ticket's shuffle
        }
    } else {
        constexpr int SUBWARPS = 32 / W;
        constexpr int SPAN = ROWS * SUBWARPS;  // positions a ticket
        const unsigned long long tickets = (sys.n + SPAN - 1) / SPAN;
        for (unsigned long long t; take_ticket<32>(ticket, tickets, t);) {
            const I first = (I)t * SPAN;
            const I last = first + SPAN < sys.n ? first + SPAN : sys.n;
            if constexpr (SUBWARPS == 1) {
                shared_rows(sys, in, first, last, true, lane, mask);
            } else {
                // Every dependency is polled: the ticket's earlier positions may be another
                // subwarp's.
                for (I k = first + sub; k < last; k += SUBWARPS) shared_rows(sys, in, k, k + 1, true, lane, mask);
            }
            __syncwarp();  // the subwarps join the next ticket's shuffle
        }
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
