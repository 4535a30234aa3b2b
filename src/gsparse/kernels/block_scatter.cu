// The gradient of a g-SpMM's source operand on a sampled block, through the block's own edges.
//
// That gradient is a g-SpMM sum on the reverse graph. A sampled block lives for one training
// step, and building its reverse graph (a sort of its edges, then a kernel's plan on the new
// graph) costs the host more than the whole backward costs the GPU. Here each edge adds its
// message to its source's row instead:
//
//     out[col[p], h, c] += lhs[dst[p], h, c'] (op) rhs[eid[p], h, c']
//
// where c' is c, or 0 for an operand spread over the last dimension (attention weights of
// [E, H, 1] against features of [N, H, C]). A group of `lanes` threads (a power
// of two up to 32, about as many as the row's features) takes an edge and strides over its
// features. The adds land in any order, so a result may differ in its last bits from run to
// run; under torch.use_deterministic_algorithms the front end builds the reverse graph
// instead.
//
// The indices come from a built graph (its checks passed), so every id is in range.

enum ScatterOp { COPY_LHS = 0, COPY_RHS = 1, MUL = 2, DIV = 3 };

template <typename T, typename I, int OP>
__device__ void block_scatter(const I* __restrict__ col, const I* __restrict__ dst,
                              const I* __restrict__ eid, const T* __restrict__ lhs,
                              const T* __restrict__ rhs, long long num_edges, int heads,
                              int width, int lhs_spread, int rhs_spread, T* __restrict__ out,
                              int lanes_log2)
{
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = (int)(thread & ((1 << lanes_log2) - 1));
    const long long step = ((long long)gridDim.x * blockDim.x) >> lanes_log2;
    const int features = heads * width;  // below 2**31: the host checks
    const int lhs_row = lhs_spread ? heads : features;
    const int rhs_row = rhs_spread ? heads : features;
    for (long long p = thread >> lanes_log2; p < num_edges; p += step) {
        const long long v = (long long)dst[p];
        const long long e = eid != nullptr ? (long long)eid[p] : p;
        const T* lhs_at = OP == COPY_RHS ? nullptr : lhs + v * lhs_row;
        const T* rhs_at = OP == COPY_LHS ? nullptr : rhs + e * rhs_row;
        T* target = out + (long long)col[p] * features;
        for (int f = lane; f < features; f += 1 << lanes_log2) {
            const int h = f / width;
            T message;
            if (OP == COPY_LHS) {
                message = lhs_at[lhs_spread ? h : f];
            } else if (OP == COPY_RHS) {
                message = rhs_at[rhs_spread ? h : f];
            } else if (OP == MUL) {
                message = lhs_at[lhs_spread ? h : f] * rhs_at[rhs_spread ? h : f];
            } else {
                message = lhs_at[lhs_spread ? h : f] / rhs_at[rhs_spread ? h : f];
            }
            atomicAdd(target + f, message);
        }
    }
}
