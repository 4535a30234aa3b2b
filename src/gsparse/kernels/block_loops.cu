// A sampled block's self-loop graph, which GCN and GAT layers propagate over, and GCN's
// symmetric normalisation of it.
//
// Row v of the block keeps every edge, its own self loops too (dropping them would need
// their count on the host), and gains one loop at its end: edge p of row v moves to p + v,
// the loop of row v sits at rowptr[v + 1] + v, so every size is known without reading the
// device. The block's own loops are `masked`: no weight, no attention.
//
// GCN weighs edge u -> v of the loop graph a / sqrt(deg(u) deg(v)), where a is its weight
// in Â: 0 on a masked loop, 1 on the other edges and on the added loop, 2 on the added loop
// of a node without a loop of its own under `improved`; deg(v) sums row v's weights, an
// exact integer. The weights need both ends' degrees, so they take a second pass over
// positions.
//
// The indices come from a built graph (its checks passed), so every id is in range.

// A warp walks a row, its lanes 32 edges apart: a block's rows are mostly a sampler's
// fanout, but a block without one may hold a hub row of many thousand edges.
#define FOR_EACH_ROW_BY_WARP(row, num_rows)                                                        \
    const int lane = threadIdx.x % 32;                                                            \
    const long long warps = (long long)gridDim.x * (blockDim.x / 32);                             \
    for (long long row = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; row < (num_rows); \
         row += warps)

// The loop graph of rows [0, num_rows): its row pointers, its `edges` as two rows of
// `loop_edges` entries (the sources, then the destinations), and the mask of the block's
// own loops.
template <typename I, typename J>
__device__ void block_loops(const I* __restrict__ rowptr, const I* __restrict__ col, long long num_rows,
                            long long loop_edges, J* __restrict__ loop_rowptr, J* __restrict__ edges,
                            bool* __restrict__ masked)
{
    J* __restrict__ dst = edges + loop_edges;
    FOR_EACH_ROW_BY_WARP(v, num_rows) {
        const long long start = rowptr[v], end = rowptr[v + 1];
        for (long long p = start + lane; p < end; p += 32) {
            const long long u = col[p];
            edges[p + v] = (J)u;
            dst[p + v] = (J)v;
            masked[p + v] = u == v;
        }
        if (lane == 0) {
            edges[end + v] = (J)v;
            dst[end + v] = (J)v;
            masked[end + v] = false;
            loop_rowptr[v] = (J)(start + v);
            if (v == num_rows - 1) {
                loop_rowptr[num_rows] = (J)(end + num_rows);
            }
        }
    }
}

__device__ __forceinline__ float inverse_sqrt(float x) { return rsqrtf(x); }
__device__ __forceinline__ double inverse_sqrt(double x) { return rsqrt(x); }

// Per row of the loop graph: its edges' weights in Â (into `weight`) and 1 / sqrt(deg(v)).
// Every row has its loop, so no degree is 0.
template <typename J, typename T>
__device__ void loop_degrees(const J* __restrict__ loop_rowptr, const bool* __restrict__ masked,
                             long long num_rows, int improved, T* __restrict__ dinv,
                             T* __restrict__ weight)
{
    FOR_EACH_ROW_BY_WARP(v, num_rows) {
        const long long start = loop_rowptr[v], loop = (long long)loop_rowptr[v + 1] - 1;
        long long kept = 0;
        for (long long q = start + lane; q < loop; q += 32) {
            const bool own = masked[q];
            kept += !own;
            weight[q] = own ? T(0) : T(1);
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) {
            kept += __shfl_xor_sync(0xffffffffu, kept, offset);
        }
        if (lane == 0) {
            const bool had_loop = kept < loop - start;
            const T loop_weight = improved && !had_loop ? T(2) : T(1);
            weight[loop] = loop_weight;
            dinv[v] = inverse_sqrt(T(kept) + loop_weight);
        }
    }
}

// Per position: the weight in Â times dinv at both ends, in PyTorch's order of the product
// ((dinv[u] * dinv[v]) * a).
template <typename J, typename T>
__device__ void loop_weights(const J* __restrict__ edges, long long loop_edges, const T* __restrict__ dinv,
                             T* __restrict__ weight)
{
    const J* __restrict__ dst = edges + loop_edges;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < loop_edges; q += stride) {
        weight[q] = (dinv[edges[q]] * dinv[dst[q]]) * weight[q];
    }
}
