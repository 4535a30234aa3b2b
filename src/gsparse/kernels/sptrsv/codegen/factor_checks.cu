// The checks of a triangular factor's CSR, and of its diagonal values, in one launch.
//
// A TriangularSolver validates its factor once. Done with PyTorch operations on a GPU, that
// was about twenty small launches and eight host waits, and the first solver of a process
// also paid PyTorch's lazy loading of each of those kernels (about 160 ms on an H100). Here
// one pass records, for every rule, its first violation (the smallest offending index) in
// one int64 slot of `report`, which the host sets to NONE before the launch, reads back
// once, and turns into the error message of the first rule broken, in the order
// gsparse._triangular checks them. A valid factor writes no violation.
//
// The same pass measures two statistics of the pattern, which the fast start's rule reads
// (gsparse.kernels.sptrsv.default.natural_schedule) without a second read-back: the entries
// of the longest row and the rows with an off-diagonal entry within NEAR of the diagonal.
// Their slots start at 0; each warp folds its rows' values in registers and adds them once.
//
// No read is out of bounds, whatever the indices hold: crow is read at 0..n, col and val at
// positions in [0, nnz) only. A row's entries are read only when its offsets lie in
// [0, nnz) and do not decrease; a row whose offsets do not is skipped, which leaves the rows'
// slots meaningless, but then a crow slot is set, and the host reports that first. An entry
// whose column is out of range takes no part in the rows' rules, for the same reason.

namespace gs::checks {

constexpr long long NONE = 0x7fffffffffffffffLL;  // no violation: atomicMin keeps the smallest
constexpr int WARP = 32;
// NEAR, the distance from the diagonal within which an entry is near, is declared in this
// namespace ahead of this file by gsparse.kernels.sptrsv.checks (gsparse.kernels.sptrsv.stats.NEAR).

// The slots of `report`, in the order the host reports them (gsparse.kernels.sptrsv.checks).
enum Slot {
    CROW_ENDS,     // 0 when crow[0] != 0 or crow[n] != nnz
    DECREASE,      // the first i with crow[i + 1] < crow[i]
    OUT_OF_RANGE,  // the first e with col[e] outside [0, n)
    UNSORTED,      // the first row whose columns do not strictly increase (or repeat)
    WRONG_SIDE,    // the smallest row * max(n, 1) + col of an entry on the wrong side (the
                   // host's sort key: below 2^63 for n < 3 * 10^9)
    NO_DIAGONAL,   // the first row without a diagonal entry
    BAD_DIAGONAL,  // the first row whose diagonal value is zero or not finite (val given)
    LONGEST_ROW,   // statistic: the most entries of a row (atomicMax; starts at 0)
    NEAR_ROWS,     // statistic: rows with an entry at 0 < |col - row| <= NEAR (atomicAdd; starts at 0)
};

template <typename T>
__device__ void check_factor(const long long* __restrict__ crow, const long long* __restrict__ col,
                             const T* __restrict__ val, long long n, long long nnz, int lower,
                             long long* __restrict__ report)
{
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long threads = (long long)gridDim.x * blockDim.x;
    if (thread == 0 && (crow[0] != 0 || crow[n] != nnz)) report[CROW_ENDS] = 0;
    for (long long i = thread; i < n; i += threads) {
        if (crow[i + 1] < crow[i]) atomicMin(&report[DECREASE], i);
    }
    for (long long e = thread; e < nnz; e += threads) {
        const long long c = col[e];
        if (c < 0 || c >= n) atomicMin(&report[OUT_OF_RANGE], e);
    }
    // A warp per row: long rows are read coalesced, and the warp votes on its diagonal.
    const int lane = threadIdx.x % WARP;
    const long long width = n > 1 ? n : 1;
    long long longest = 0, near_rows = 0;  // the statistics (near_rows: lane 0's count)
    for (long long r = thread / WARP; r < n; r += threads / WARP) {
        const long long begin = crow[r], end = crow[r + 1];
        if (begin < 0 || end < begin || end > nnz) continue;  // the same for the whole warp
        longest = end - begin > longest ? end - begin : longest;
        bool diagonal = false, near = false;
        for (long long e = begin + lane; e < end; e += WARP) {
            const long long c = col[e];
            if (c < 0 || c >= n) continue;
            if (c != r && (c > r ? c - r : r - c) <= NEAR) near = true;
            if (e + 1 < end && col[e + 1] <= c) atomicMin(&report[UNSORTED], r);
            if (lower ? c > r : c < r) atomicMin(&report[WRONG_SIDE], r * width + c);
            if (c == r) {
                diagonal = true;
                if (val != nullptr && (val[e] == T(0) || !isfinite(val[e]))) {
                    atomicMin(&report[BAD_DIAGONAL], r);
                }
            }
        }
        if (!__any_sync(0xffffffffu, diagonal) && lane == 0) atomicMin(&report[NO_DIAGONAL], r);
        if (__any_sync(0xffffffffu, near) && lane == 0) ++near_rows;
    }
    if (lane == 0) {
        if (longest > 0) atomicMax(&report[LONGEST_ROW], longest);
        if (near_rows > 0) atomicAdd((unsigned long long*)&report[NEAR_ROWS], (unsigned long long)near_rows);
    }
}

}  // namespace gs::checks

// The entry points, one per value type, are declared by gsparse.kernels.sptrsv.checks from
// their Signature, which also binds each launch's arguments by name.
