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
// [E, H, 1] against features of [N, H, C]); a mean's gradient (COPY_LHS_OVER_DEGREE) divides
// each lhs row by its destination's degree first. A group of `lanes` threads (a power of two up
// to 32, about as many as the row's vectors) takes an edge and strides over its features, V
// at a time: float rows add 4 or 2 features with one atomic instruction on Hopper. The adds
// land in any order, so a result may differ in its last bits from run to
// run; under torch.use_deterministic_algorithms the front end builds the reverse graph
// instead.
//
// The indices come from a built graph (its checks passed), so every id is in range.

enum ScatterOp { COPY_LHS = 0, COPY_RHS = 1, MUL = 2, DIV = 3, COPY_LHS_OVER_DEGREE = 4 };

// V values added at `at` (aligned to V elements): one atomic instruction for 2 or 4 floats
// on Hopper (sm_90), one a value before it.
template <typename T, int V>
__device__ __forceinline__ void add_vector(T* at, const T (&values)[V])
{
#if __CUDA_ARCH__ >= 900
    if constexpr (sizeof(T) == 4 && V == 4) {
        atomicAdd(reinterpret_cast<float4*>(at), make_float4(values[0], values[1], values[2], values[3]));
        return;
    } else if constexpr (sizeof(T) == 4 && V == 2) {
        atomicAdd(reinterpret_cast<float2*>(at), make_float2(values[0], values[1]));
        return;
    }
#endif
#pragma unroll
    for (int k = 0; k < V; ++k) {
        atomicAdd(at + k, values[k]);
    }
}

// V features of an operand's row at feature f of head h: its own, or its head's value
// (a spread operand) V times.
template <int V, typename T>
__device__ __forceinline__ void read_vector(const T* row, int spread, int f, int h, T (&values)[V])
{
    if (spread) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
            values[k] = row[h];
        }
    } else {
        gs::load<V>(row + f, values);
    }
}

// A group of 2**lanes_log2 threads per edge, each V consecutive features at a time; `width`
// is a multiple of V, so a vector never straddles two heads.
template <typename T, typename I, int OP, int V>
__device__ void block_scatter(const I* __restrict__ col, const I* __restrict__ dst,
                              const I* __restrict__ eid, const T* __restrict__ lhs,
                              const T* __restrict__ rhs, const I* __restrict__ rowptr,
                              long long num_edges, int heads,
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
        // a mean's gradient: the lhs row over its destination's degree (at least 1), the
        // division PyTorch's would make
        const T degree = OP == COPY_LHS_OVER_DEGREE
                             ? T(max((long long)rowptr[v + 1] - (long long)rowptr[v], 1LL))
                             : T(1);
        T* target = out + (long long)col[p] * features;
        for (int f = lane * V; f < features; f += V << lanes_log2) {
            const int h = f / width;
            T a[V], b[V];
            if (OP != COPY_RHS) {
                read_vector<V>(lhs_at, lhs_spread, f, h, a);
                if (OP == COPY_LHS_OVER_DEGREE) {
#pragma unroll
                    for (int k = 0; k < V; ++k) {
                        a[k] = a[k] / degree;
                    }
                }
            }
            if (OP != COPY_LHS) {
                read_vector<V>(rhs_at, rhs_spread, f, h, b);
            }
#pragma unroll
            for (int k = 0; k < V; ++k) {
                a[k] = OP == COPY_RHS ? b[k] : OP == MUL ? a[k] * b[k] : OP == DIV ? a[k] / b[k] : a[k];
            }
            add_vector<T, V>(target + f, a);
        }
    }
}
