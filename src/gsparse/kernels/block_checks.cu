// The checks of Graph.from_block and Graph.from_block_csr, each in one launch.
//
// A sampled block is checked on the device so that the host never waits for a verdict:
// every thread checks a few positions (a grid-stride loop) and a violation stops the
// kernel with a device-side assertion (the error torch._assert_async raises), after
// printing which index broke which rule. Nothing is written; a valid block costs one read
// of its indices.
//
// Index types vary per argument (the user's int32 / int64 tensors are read as given, so
// that an int64 index is checked before it is narrowed): each entry point is one
// instantiation, named after its types.

extern "C" __device__ void __assertfail(const char* message, const char* file, unsigned line,
                                        const char* function, size_t char_size);

#define BLOCK_CHECK(cond, ...)                                                        \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf(__VA_ARGS__);                                                      \
            __assertfail(#cond, __FILE__, __LINE__, __func__, sizeof(char));          \
        }                                                                             \
    } while (0)

// Edge i (u -> v) of a block's edge list has both ends in range.
__device__ inline void check_edge_range(long long i, long long u, long long v, long long num_src,
                                        long long num_dst)
{
    BLOCK_CHECK(0 <= u && u < num_src,
                "from_block: edge_index[0, %lld] = %lld is out of range [0, num_src = %lld)\n",
                i, u, num_src);
    BLOCK_CHECK(0 <= v && v < num_dst,
                "from_block: edge_index[1, %lld] = %lld is out of range [0, num_dst = %lld)\n",
                i, v, num_dst);
}

// Destination v has at most max_degree edges (`fits`, as each caller can tell).
#define CHECK_DEGREE(fits, v, max_degree)                                                        \
    BLOCK_CHECK(fits, "from_block: destination %lld has more than max_degree = %lld edges\n",    \
                (long long)(v), (long long)(max_degree))

// Edge i of a [2, E] edge list: edges[i * stride] -> edges[row_stride + i * stride], the
// tensor's strides as they are (a transposed [E, 2] view is read in place). The edges come
// in any order; `sorted` holds their destinations sorted (the CSR's row of each position)
// when a max_degree is to be checked.
template <typename K, typename S>
__device__ void check_edges(const K* __restrict__ edges, long long row_stride, long long stride,
                            const S* __restrict__ sorted, long long num_edges, long long num_src,
                            long long num_dst, long long max_degree)
{
    const K* src = edges;
    const K* dst = edges + row_stride;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < num_edges; i += step) {
        check_edge_range(i, src[i * stride], dst[i * stride], num_src, num_dst);
        // A row has more than max_degree edges exactly when some position i of the
        // destinations in order has sorted[i - max_degree] == sorted[i].
        if (sorted != nullptr && i >= max_degree) {
            CHECK_DEGREE(sorted[i - max_degree] != sorted[i], sorted[i], max_degree);
        }
    }
}

// A block whose edges arrive sorted by destination, as a sampler emits them: its CSR read off
// in one pass and checked as check_edges checks, with the order. rowptr[r] is the first
// position whose destination is r or more (a binary search, which stays in [0, E] whatever
// the input), col and rows are each position's source and destination in the index type.
template <typename K, typename I>
__device__ void sorted_edges(const K* __restrict__ edges, long long row_stride, long long stride,
                             I* __restrict__ rowptr, I* __restrict__ col, I* __restrict__ rows,
                             long long num_edges, long long num_src, long long num_dst,
                             long long max_degree)
{
    const K* src = edges;
    const K* dst = edges + row_stride;
    const long long step = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    // The checks first, in a loop of their own: around the assertions' calls ptxas keeps
    // fewer values alive (the write loop's would spill on sm_80).
    for (long long i = first; i < num_edges; i += step) {
        const long long v = dst[i * stride];
        check_edge_range(i, src[i * stride], v, num_src, num_dst);
        if (i > 0) {
            const long long before = dst[(i - 1) * stride];
            BLOCK_CHECK(before <= v,
                        "from_block: destinations out of order (dst_sorted=True): "
                        "edge_index[1, %lld] = %lld > edge_index[1, %lld] = %lld\n",
                        i - 1, before, i, v);
        }
        if (max_degree >= 0 && i >= max_degree) {
            CHECK_DEGREE(dst[(i - max_degree) * stride] != v, v, max_degree);
        }
    }
    const long long positions = max(num_edges, num_dst + 1);
    for (long long i = first; i < positions; i += step) {
        if (i < num_edges) {
            col[i] = (I)src[i * stride];
            rows[i] = (I)dst[i * stride];
        }
        if (i <= num_dst) {
            long long low = 0, high = num_edges;
            while (low < high) {
                const long long middle = low + (high - low) / 2;
                if (dst[middle * stride] < i) {
                    low = middle + 1;
                } else {
                    high = middle;
                }
            }
            rowptr[i] = (I)low;
        }
    }
}

// A CSR over num_dst rows: rowptr[0] == 0, rowptr[num_dst] == E, rows of 0..max_degree
// edges (max_degree < 0: no bound), col in [0, num_src), eid (optional) in [0, E).
template <typename I>
__device__ void check_csr(const I* __restrict__ rowptr, const I* __restrict__ col,
                          const I* __restrict__ eid, long long num_dst, long long num_edges,
                          long long num_src, long long max_degree)
{
    const long long step = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (first == 0) {
        BLOCK_CHECK(rowptr[0] == 0 && rowptr[num_dst] == num_edges,
                    "from_block_csr: rowptr must run from 0 to len(col) = %lld, got rowptr[0] = "
                    "%lld and rowptr[-1] = %lld\n", num_edges, (long long)rowptr[0],
                    (long long)rowptr[num_dst]);
    }
    for (long long r = first; r < num_dst; r += step) {
        const long long length = (long long)rowptr[r + 1] - rowptr[r];
        BLOCK_CHECK(length >= 0, "from_block_csr: rowptr decreases: rowptr[%lld] = %lld < "
                    "rowptr[%lld] = %lld\n", r + 1, (long long)rowptr[r + 1], r, (long long)rowptr[r]);
        BLOCK_CHECK(max_degree < 0 || length <= max_degree,
                    "from_block_csr: row %lld has %lld edges, more than max_degree = %lld\n",
                    r, length, max_degree);
    }
    for (long long e = first; e < num_edges; e += step) {
        const long long u = col[e];
        BLOCK_CHECK(0 <= u && u < num_src,
                    "from_block_csr: col[%lld] = %lld is out of range [0, num_src = %lld)\n",
                    e, u, num_src);
        if (eid != nullptr) {
            const long long id = eid[e];
            BLOCK_CHECK(0 <= id && id < num_edges,
                        "from_block_csr: eid[%lld] = %lld is out of range [0, %lld)\n",
                        e, id, num_edges);
        }
    }
}

// A block whose edges come in any order and whose rows hold at most max_degree edges (a
// sampler's fanout) is bucketed by destination without a sort, in two launches with a
// cumulative sum between them (gsparse._block_checks.bucket_edges):
//
// 1. count_edges checks every edge as check_edges does, counts each destination's edges
//    (counts, zeroed: rowptr[1:], which the sum then turns into offsets) and files edge i in
//    its row's slot of a [num_dst, max_degree] table in the order the atomics hand out,
//    which is arbitrary: a row past max_degree stops with an assertion before it writes out
//    of its slots.
// 2. order_rows puts each row back in edge order, as a stable sort would: one warp a row,
//    each filed edge's place is the number of the row's edges with a smaller id (rows are
//    short: at most max_degree comparisons an edge). It writes the CSR position's edge id,
//    source (from the user's edge list, in the index type) and row.
__device__ inline long long count_one(int* count) { return atomicAdd(count, 1); }
__device__ inline long long count_one(long long* count)
{
    return (long long)atomicAdd((unsigned long long*)count, 1ull);
}

template <typename K, typename I>
__device__ void count_edges(const K* __restrict__ edges, long long row_stride, long long stride,
                            I* __restrict__ counts, I* __restrict__ table, long long num_edges,
                            long long num_src, long long num_dst, long long max_degree)
{
    const K* src = edges;
    const K* dst = edges + row_stride;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < num_edges; i += step) {
        const long long u = src[i * stride], v = dst[i * stride];
        check_edge_range(i, u, v, num_src, num_dst);
        const long long slot = count_one(counts + v);
        CHECK_DEGREE(slot < max_degree, v, max_degree);
        table[v * max_degree + slot] = (I)i;
    }
}

template <typename K, typename I>
__device__ void order_rows(const K* __restrict__ edges, long long stride, const I* __restrict__ table,
                           const I* __restrict__ rowptr, I* __restrict__ col, I* __restrict__ eid,
                           I* __restrict__ rows, long long num_dst, long long max_degree)
{
    const int lane = threadIdx.x % 32;
    const long long warps = (long long)gridDim.x * (blockDim.x / 32);
    for (long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < num_dst; r += warps) {
        const I* filed = table + r * max_degree;
        const long long start = rowptr[r];
        const long long length = min((long long)rowptr[r + 1] - start, max_degree);
        for (long long j = lane; j < length; j += 32) {
            const I id = filed[j];
            long long place = 0;
            for (long long k = 0; k < length; ++k) {
                place += filed[k] < id;
            }
            eid[start + place] = id;
            col[start + place] = (I)edges[(long long)id * stride];
            rows[start + place] = (I)r;
        }
    }
}

// The entry points, one per index-type pair, are declared by gsparse._block_checks from
// their Signature, which also binds each launch's arguments by name.
