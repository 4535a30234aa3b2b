// The AG-SpTRSV solve (gsparse.kernels.sptrsv.codegen): fixed device code, specialised by the
// constants of namespace cfg that the generator prints above it (types T, A, I and the code
// variant's knobs).
//
// The system is T x = b, T an n x n triangular CSR (crow, col, val) with sorted rows, b and x
// [n, K] row-major. Rows are solved in *positions*: position k solves row row_at(k), and the
// plan cuts the positions into row groups (runs of consecutive positions), gathers row groups
// into node groups (up to one per subwarp, all of one level) and lists each warp's node groups
// in order, one list per kernel launch (a partition of alpha_level):
//
//   part = [seg_lo, seg_hi, waits]    this launch's segments and whether its rows wait
//   seg_warp[s], seg_start[s..s+1]    segment s: warp seg_warp[s] runs node groups
//                                     seg_start[s] .. seg_start[s+1] - 1 (warps ascending)
//   node_ptr[q..q+1]                  node group q's slots; slot i goes to subwarp i
//   slot_group[i]                     the row group of a slot
//   group_start[g..g+1]               row group g's positions
//   group_per_thread[g]               whether g's rows go one per thread (else shared by a subwarp)
//   row_flag[k]                       whether position k's row writes its ready flag
//
// Dependencies across row groups are waited on through ready flags: row r is final once
// flags[r] == epoch (an acquire load); its solver writes x, then the flag with a release
// store. The epoch changes every solve, so flags never need clearing between solves. With
// READY_BY_VALUE the values are the signal instead: x starts as SENTINEL, a row's solver stores
// its values with strong (relaxed, GPU-scope) stores, and a waiting row polls each value it
// reads until it is not SENTINEL: no flag, no fence, no acquire. With X_IN_SHARED (the fast
// start in one block) the values also live in the block's shared memory, xs, where the waiting
// rows poll them: a wait is then a shared-memory load, not a trip through L2. The grid
// is persistent and never larger than what the GPU holds at once (the plan sizes it), so a
// spinning warp never waits on a block that has not started.

namespace gs {
namespace sptrsv {

using namespace cfg;

constexpr unsigned FULL_MASK = 0xffffffffu;

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void store_release(unsigned* p, unsigned v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}

// Strong accesses to x under READY_BY_VALUE, as bits. The polling load has no memory clobber,
// so the compiler may issue the row's other loads (col, val, b) around it; the plain one
// (reads the subwarp ordered by __syncwarp) and the store keep theirs.
__device__ __forceinline__ unsigned long long poll_bits(const double* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ unsigned poll_bits(const float* p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ unsigned long long load_bits(const double* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ unsigned load_bits(const float* p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void store_bits(double* p, unsigned long long v) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void store_bits(float* p, unsigned v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" : : "l"(p), "r"(v) : "memory");
}
// x's copy in shared memory under X_IN_SHARED: volatile accesses, one load or store each.
__device__ __forceinline__ unsigned long long shared_bits(const double* p) {
    return *reinterpret_cast<const volatile unsigned long long*>(p);
}
__device__ __forceinline__ unsigned shared_bits(const float* p) { return *reinterpret_cast<const volatile unsigned*>(p); }
__device__ __forceinline__ void store_shared_bits(double* p, unsigned long long v) {
    *reinterpret_cast<volatile unsigned long long*>(p) = v;
}
__device__ __forceinline__ void store_shared_bits(float* p, unsigned v) { *reinterpret_cast<volatile unsigned*>(p) = v; }
__device__ __forceinline__ double from_bits(unsigned long long v) { return __longlong_as_double((long long)v); }
__device__ __forceinline__ float from_bits(unsigned v) { return __uint_as_float(v); }
__device__ __forceinline__ unsigned long long to_bits(double v) { return (unsigned long long)__double_as_longlong(v); }
__device__ __forceinline__ unsigned to_bits(float v) { return __float_as_uint(v); }

// What every row solve reads; one per thread.
struct System {
    const I* __restrict__ crow;
    const I* __restrict__ col;
    const T* __restrict__ val;
    const I* __restrict__ order;     // position -> row (REORDER only)
    const I* __restrict__ position;  // row -> position (REORDER only)
    const unsigned char* __restrict__ row_flag;  // ELIMINATE only
    const T* __restrict__ b;
    T* x;  // read back for dependencies while being written: neither const nor restrict
    unsigned* flags;
    unsigned epoch;
    I n;
    T* xs;  // X_IN_SHARED only: x in the block's shared memory, [n, K], SENTINEL until solved

    __device__ __forceinline__ I row_at(I k) const {
        if constexpr (REORDER) return order[k];
        else if constexpr (LOWER) return k;
        else return n - 1 - k;
    }

    __device__ __forceinline__ I position_of(I row) const {
        if constexpr (REORDER) return position[row];
        else if constexpr (LOWER) return row;
        else return n - 1 - row;
    }

    __device__ __forceinline__ void wait_ready(I row) const {
        while (load_acquire(flags + row) != epoch) {
        }
    }

    __device__ __forceinline__ bool writes_flag(I k) const {
        if constexpr (READY_BY_VALUE) return false;
        else if constexpr (ELIMINATE) return row_flag[k] != 0;
        else return true;
    }

    // The values x[j[t], c] a lane reads for its TX entries t (dependencies j[t]; `has[t]`
    // false for an empty slot) and its CX columns c = c_first + i * c_stride below K, into
    // out[t * CX + i] (0 where there is none). With READY_BY_VALUE they are polled until solved
    // where the row waits for them (`wait[t]`); with flags, the caller has waited on the rows'
    // flags already. READ_BATCH loads are issued before any of them is checked: a check waits
    // for its load's round trip through L2, so checking each value before issuing the next
    // would pay one round trip per value, and a dependency chain pays that on every row.
    template <int TX, int CX>
    __device__ __forceinline__ void read_xs(const I (&j)[TX], const bool (&has)[TX], const bool (&wait)[TX],
                                            int c_first, int c_stride, A (&out)[TX * CX]) const {
        constexpr int N = TX * CX;
#pragma unroll
        for (int q0 = 0; q0 < N; q0 += READ_BATCH) {
            decltype(to_bits(T(0))) bits[READ_BATCH];
#pragma unroll
            for (int d = 0; d < READ_BATCH; ++d) {
                const int q = q0 + d;
                const int c = c_first + (q % CX) * c_stride;
                const bool use = q < N && has[q / CX] && c < K;
                const T* at = (X_IN_SHARED ? xs : x) + (long long)j[q < N ? q / CX : 0] * K + c;
                bits[d] = 0;
                if (use) {
                    if constexpr (X_IN_SHARED) bits[d] = shared_bits(at);
                    else if constexpr (READY_BY_VALUE) bits[d] = wait[q / CX] ? poll_bits(at) : load_bits(at);
                    else bits[d] = to_bits(*at);
                }
            }
#pragma unroll
            for (int d = 0; d < READ_BATCH; ++d) {
                const int q = q0 + d;
                if (q >= N) break;
                const int c = c_first + (q % CX) * c_stride;
                const bool use = has[q / CX] && c < K;
                if constexpr (READY_BY_VALUE) {
                    if (use && wait[q / CX]) {
                        const T* at = (X_IN_SHARED ? xs : x) + (long long)j[q / CX] * K + c;
                        if constexpr (X_IN_SHARED) {
                            while (bits[d] == SENTINEL) bits[d] = shared_bits(at);
                        } else {
                            while (bits[d] == SENTINEL) bits[d] = poll_bits(at);
                        }
                    }
                }
                out[q] = use ? gs::to_acc(from_bits(bits[d])) : A(0);
            }
        }
    }

    __device__ __forceinline__ void write_x(long long o, A value) const {
        const T v = gs::from_acc<T>(value);
        if constexpr (X_IN_SHARED) {
            const auto bits = to_bits(v) == SENTINEL ? QUIET_NAN : to_bits(v);
            store_shared_bits(xs + o, bits);
            x[o] = from_bits(bits);
        } else if constexpr (READY_BY_VALUE) {
            const auto bits = to_bits(v);
            store_bits(x + o, bits == SENTINEL ? QUIET_NAN : bits);
        } else {
            x[o] = v;
        }
    }

    // Narrows [s, e) to the row's off-diagonal entries and returns its diagonal (1 when unit).
    // Rows are sorted, so a stored diagonal is the last entry of a lower row, the first of an
    // upper one; without unit_diagonal the front end guarantees it is there.
    __device__ __forceinline__ A diagonal(I r, I& s, I& e) const {
        if constexpr (UNIT) {
            if constexpr (LOWER) {
                if (e > s && col[e - 1] == r) --e;
            } else {
                if (e > s && col[s] == r) ++s;
            }
            return A(1);
        } else if constexpr (LOWER) {
            return gs::to_acc(val[--e]);
        } else {
            return gs::to_acc(val[s++]);
        }
    }
};

// x_r from the residual b_r - sum_j T_rj x_j: times the reciprocal taken before the waits
// (early division), or divided now.
__device__ __forceinline__ A finish(A residual, A diag, A inverse) {
    if constexpr (UNIT) return residual;
    else if constexpr (EARLY_DIVISION) return residual * inverse;
    else return residual / diag;
}

// Whether a row reads its right side b before waiting for its dependencies, when a lane
// keeps `columns` columns: read after the waits, b's trip to L2 lies on every dependency
// chain (read first, solves ran 2-15% faster on the real graphs and 10-32% on 100K-row
// meshes and roads on an H200; docs/performance.md); with more than two columns a lane's
// loads overlap anyway, and 1,024-thread blocks have no registers to spare for them
// (ptxas spilled).
__host__ __device__ constexpr bool early_rhs(int columns) { return columns <= 2; }

__device__ __forceinline__ A early_inverse(A diag) {
    if constexpr (EARLY_DIVISION && !UNIT) return A(1) / diag;
    else return A(0);
}

// Where a node group's entries are read: from the warp's shared-memory buffer after a
// collaborative read (entry p at buffer[p + shift]), else from global memory.
struct Entries {
    const I* s_col;
    const T* s_val;
    I shift;
    bool staged;

    __device__ __forceinline__ I col(const System& sys, I p) const {
        if constexpr (STAGE) {
            if (staged) return s_col[p + shift];
        }
        return sys.col[p];
    }

    __device__ __forceinline__ A val(const System& sys, I p) const {
        if constexpr (STAGE) {
            if (staged) return gs::to_acc(s_val[p + shift]);
        }
        return gs::to_acc(sys.val[p]);
    }
};

// Entries a lane takes at once when it keeps `columns` columns: enough for a batch of reads
// (System::read_xs).
__host__ __device__ constexpr int tile_entries(int columns) { return columns >= READ_BATCH ? 1 : READ_BATCH / columns; }

// Adds to acc the lane's entries from, from + stride, ... before e, times x at its CX columns
// c_first + i * c_stride, TX entries at a time (their reads issued together). A dependency
// before the group is waited on when the launch waits; one inside it was solved before by
// this subwarp, unless rows go one per lane (`lane_rows`) and another lane owns it. With
// flags the waits happen in the first pass over the row (`first_pass`), and later passes read
// the same entries in the same lane. UNROLL: unrolled walks keep several entries' loads in
// flight; with many columns per entry there are enough already, and the registers are
// better spent on them.
template <int TX, int CX, bool lane_rows, int UNROLL>
__device__ __forceinline__ void accumulate(const System& sys, const Entries& in, I from, int stride, I e, I first,
                                           bool waits, int lane, bool first_pass, int c_first, int c_stride,
                                           A (&acc)[CX]) {
#pragma unroll(UNROLL)
    for (I p0 = from; p0 < e; p0 += stride * TX) {
        I j[TX];
        A v[TX];
        bool has[TX];
        bool wait[TX];
#pragma unroll
        for (int t = 0; t < TX; ++t) {
            const I p = p0 + t * stride;
            has[t] = p < e;
            j[t] = has[t] ? in.col(sys, p) : I(0);
            v[t] = has[t] ? in.val(sys, p) : A(0);
            const I pj = sys.position_of(j[t]);
            wait[t] = has[t] && (pj < first ? waits : lane_rows && W > 1 && (pj - first) % W != lane);
            if constexpr (!READY_BY_VALUE) {
                if (first_pass && wait[t]) sys.wait_ready(j[t]);
            }
        }
        A xs[TX * CX];
        sys.read_xs<TX, CX>(j, has, wait, c_first, c_stride, xs);
#pragma unroll
        for (int t = 0; t < TX; ++t) {
#pragma unroll
            for (int i = 0; i < CX; ++i) acc[i] += v[t] * xs[t * CX + i];
        }
    }
}

// A shared row walked column-major: CLX column lanes (right-hand sides c, c + CLX, ...) times
// W / CLX entry lanes (every (W / CLX)-th entry), each lane keeping CPLX columns per pass over the
// row, the entry lanes' partial sums merged by shuffles. Short rows take CL column lanes, so
// that one dependency's k values are one coalesced read. A long row (LONG_ROW entries or more)
// takes LCL: fewer column lanes with more columns each (LCPL, as many as a row per thread
// keeps), so more of its entries are in flight at once. A row that others wait on is on the
// critical path, and power-law factors have rows of thousands of entries.
template <int CLX, int CPLX>
__device__ __forceinline__ void column_major_row(const System& sys, const Entries& in, I r, I s, I e, A diag,
                                                 A inverse, I first, bool waits, int lane, unsigned mask) {
    constexpr int ELX = W / CLX;
    const int cl = lane % CLX;
    const int el = lane / CLX;
    for (int c0 = 0; c0 < K; c0 += CLX * CPLX) {
        A acc[CPLX];
        A rhs[CPLX];  // read before the waits where it fits (early_rhs)
#pragma unroll
        for (int i = 0; i < CPLX; ++i) {
            const int c = c0 + cl + i * CLX;
            acc[i] = A(0);
            rhs[i] = early_rhs(CPLX) && el == 0 && c < K ? gs::to_acc(sys.b[(long long)r * K + c]) : A(0);
        }
        // A lane with several entries batches their reads. A lane with one at most walks a
        // plain loop: the batch's bookkeeping, or an unrolled walk's, only lengthens the rows
        // of a chain (meshes and roads at one right-hand side ran 19-26% faster without).
        if (e - s > ELX) {
            accumulate<tile_entries(CPLX), CPLX, false, 1>(sys, in, s + el, ELX, e, first, waits, lane, c0 == 0,
                                                            c0 + cl, CLX, acc);
        } else {
            accumulate<1, CPLX, false, 1>(sys, in, s + el, ELX, e, first, waits, lane, c0 == 0, c0 + cl, CLX, acc);
        }
#pragma unroll
        for (int offset = CLX; offset < W; offset *= 2) {
#pragma unroll
            for (int i = 0; i < CPLX; ++i) acc[i] += __shfl_xor_sync(mask, acc[i], offset, W);
        }
        if (el == 0) {
#pragma unroll
            for (int i = 0; i < CPLX; ++i) {
                const int c = c0 + cl + i * CLX;
                if (c < K) {
                    const long long o = (long long)r * K + c;
                    const A right = early_rhs(CPLX) ? rhs[i] : gs::to_acc(sys.b[o]);
                    sys.write_x(o, finish(right - acc[i], diag, inverse));
                }
            }
        }
    }
}

// A subwarp solves the row group's rows in order, each row shared by its W lanes
// (column_major_row, with the lanes of a long row or of a short one). A dependency inside the group was solved by this subwarp
// before (the __syncwarp after each row makes it visible); one outside it is waited on when
// the launch waits.
__device__ __forceinline__ void shared_rows(const System& sys, const Entries& in, I first, I last,
                                            bool waits, int lane, unsigned mask) {
    for (I k = first; k < last; ++k) {
        const I r = sys.row_at(k);
        I s = sys.crow[r];
        I e = sys.crow[r + 1];
        const A diag = sys.diagonal(r, s, e);
        const A inverse = early_inverse(diag);
        if (LONG_ROW > 0 && e - s >= LONG_ROW) {
            column_major_row<LCL, LCPL>(sys, in, r, s, e, diag, inverse, first, waits, lane, mask);
        } else {
            column_major_row<CL, CPL>(sys, in, r, s, e, diag, inverse, first, waits, lane, mask);
        }
        __syncwarp(mask);
        if (lane == 0 && sys.writes_flag(k)) {
            __threadfence();  // the other lanes' x, ordered by the __syncwarp, before the flag
            store_release(sys.flags + r, sys.epoch);
        }
    }
}

// Each lane of the subwarp solves rows of the group on its own (positions first + lane,
// first + lane + W, ...), all K right-hand sides, KC at a time. Rows of the group depend on
// each other, so a lane waits on the group's rows that other lanes solve (the plan flags
// them; its own it solved before, in program order) and on rows outside the group when the
// launch waits.
__device__ __forceinline__ void per_thread_rows(const System& sys, const Entries& in, I first, I last,
                                                bool waits, int lane) {
    for (I k = first + lane; k < last; k += W) {
        const I r = sys.row_at(k);
        I s = sys.crow[r];
        I e = sys.crow[r + 1];
        const A diag = sys.diagonal(r, s, e);
        const A inverse = early_inverse(diag);
        for (int c0 = 0; c0 < K; c0 += KC) {
            A acc[KC];
            A rhs[KC];  // read before the waits where it fits (early_rhs)
#pragma unroll
            for (int i = 0; i < KC; ++i) {
                acc[i] = A(0);
                rhs[i] = early_rhs(KC) && c0 + i < K ? gs::to_acc(sys.b[(long long)r * K + c0 + i]) : A(0);
            }
            accumulate<1, KC, true, (KC > 2 ? 1 : 4)>(sys, in, s, 1, e, first, waits, lane, c0 == 0, c0, 1, acc);
#pragma unroll
            for (int i = 0; i < KC; ++i) {
                if (c0 + i < K) {
                    const long long o = (long long)r * K + c0 + i;
                    const A right = early_rhs(KC) ? rhs[i] : gs::to_acc(sys.b[o]);
                    sys.write_x(o, finish(right - acc[i], diag, inverse));
                }
            }
        }
        if (sys.writes_flag(k)) store_release(sys.flags + r, sys.epoch);
    }
}

// The CSR entries of row group g's rows: without reordering they are consecutive rows, so
// one run [crow[lo], crow[hi + 1]).
__device__ __forceinline__ void group_entries(const System& sys, I first, I last, I& begin, I& count) {
    const I lo = LOWER ? first : sys.n - last;
    const I hi = LOWER ? last - 1 : sys.n - 1 - first;
    begin = sys.crow[lo];
    count = sys.crow[hi + 1] - begin;
}


// The collaborative read: the warp copies the entries of its node group's row groups into
// its shared-memory buffer with coalesced loads, member after member, when they fit and are
// enough to be worth it (STAGE_MIN); then each subwarp reads its group's entries from there.
__device__ __forceinline__ Entries stage(const System& sys, const I* __restrict__ slot_group,
                                         const I* __restrict__ group_start, I s0, int count, int lane,
                                         int sub, int capacity, I* s_col, T* s_val) {
    I begin = 0;
    I size = 0;
    if (lane < count) {
        const I g = slot_group[s0 + lane];
        group_entries(sys, group_start[g], group_start[g + 1], begin, size);
    }
    I end = size;  // inclusive prefix sum of the members' sizes
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
        const I before = __shfl_up_sync(FULL_MASK, end, offset);
        if (lane >= offset) end += before;
    }
    const I total = __shfl_sync(FULL_MASK, end, 31);
    Entries in{s_col, s_val, 0, false};
    if (total < STAGE_MIN || total > capacity) return in;
    for (int i = 0; i < count; ++i) {
        const I from = __shfl_sync(FULL_MASK, begin, i);
        const I length = __shfl_sync(FULL_MASK, size, i);
        const I to = __shfl_sync(FULL_MASK, end, i) - length;
#pragma unroll 1
        for (I t = lane; t < length; t += 32) {
            s_col[to + t] = sys.col[from + t];
            s_val[to + t] = sys.val[from + t];
        }
    }
    __syncwarp();
    in.staged = true;
    in.shift = __shfl_sync(FULL_MASK, end - size - begin, sub < count ? sub : 0);
    return in;
}

__device__ __forceinline__ bool rows_per_thread(const unsigned char* __restrict__ group_per_thread, I g) {
    if constexpr (!SHARED_ROWS) return true;
    else if constexpr (!PER_THREAD_ROWS) return false;
    else return group_per_thread[g] != 0;
}

// One launch: each warp finds its segment of this partition (a binary search over the warps
// that have work in it) and runs its node groups in order, subwarp i on slot i.
__device__ __forceinline__ void run(const System& sys, const I* __restrict__ seg_warp,
                                    const I* __restrict__ seg_start, const I* __restrict__ node_ptr,
                                    const I* __restrict__ slot_group, const I* __restrict__ group_start,
                                    const unsigned char* __restrict__ group_per_thread,
                                    const I* __restrict__ part, int capacity) {
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const I w = (I)blockIdx.x * NW + warp;
    const I seg_hi = part[1];
    const bool waits = part[2] != 0;
    I lo = part[0];
    I hi = seg_hi;
    while (lo < hi) {
        const I mid = lo + (hi - lo) / 2;
        if (seg_warp[mid] < w) lo = mid + 1;
        else hi = mid;
    }
    if (lo == seg_hi || seg_warp[lo] != w) return;  // no work in this launch: the whole warp leaves
    const I node_first = seg_start[lo];
    const I node_last = seg_start[lo + 1];
    const int sub = lane / W;
    const int sub_lane = lane % W;
    const unsigned mask = (FULL_MASK >> (32 - W)) << (sub * W);  // this subwarp's lanes
    I* s_col = nullptr;
    T* s_val = nullptr;
    if constexpr (STAGE) {
        extern __shared__ __align__(16) unsigned char stage_buffer[];
        s_val = reinterpret_cast<T*>(stage_buffer) + (long long)warp * capacity;
        s_col = reinterpret_cast<I*>(stage_buffer + sizeof(T) * NW * (long long)capacity) +
                (long long)warp * capacity;
    }
    for (I q = node_first; q < node_last; ++q) {
        const I s0 = node_ptr[q];
        const int count = (int)(node_ptr[q + 1] - s0);
        Entries in{s_col, s_val, 0, false};
        if constexpr (STAGE) in = stage(sys, slot_group, group_start, s0, count, lane, sub, capacity, s_col, s_val);
        if (sub < count) {
            const I g = slot_group[s0 + sub];
            const I first = group_start[g];
            const I last = group_start[g + 1];
            if (rows_per_thread(group_per_thread, g)) per_thread_rows(sys, in, first, last, waits, sub_lane);
            else shared_rows(sys, in, first, last, waits, sub_lane, mask);
        }
        // The buffer is refilled for the next node group only once every subwarp is done with
        // it; without staging, subwarps run ahead (node groups of one level are independent,
        // and a later level's rows wait on the flags of earlier ones).
        if constexpr (STAGE) __syncwarp();
    }
}

}  // namespace sptrsv
}  // namespace gs
