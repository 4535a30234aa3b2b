// Rows of a feature table gathered through an index, with dropout in the same pass.
//
// A mini-batch step reads its nodes' features out of the whole table (x[n_id]) and, in most
// models, drops out over them. Done with PyTorch that is two kernels: the gather writes the
// batch's features, the dropout reads them back and writes them again with a mask beside
// them. Here each element is read once and written once, and the mask is not stored: it is
// a counter-based random function (Philox4x32-10) of a seed drawn on the device, the output
// row and the feature, so that the backward pass makes the same mask again and a captured
// CUDA graph draws a new one on every replay.
//
// A thread takes chunks of 4 consecutive features of a row (one Philox call makes their 4
// random words) with loads of V elements; a row is read by a group of `lanes` threads (a power of
// two up to 32, about as many as the row's chunks of 4), so that narrow rows do not leave
// most of a warp idle. The index is checked on the device: an id outside the table stops
// the kernel with a device-side assertion, as PyTorch's index_select does.

extern "C" __device__ void __assertfail(const char* message, const char* file, unsigned line,
                                        const char* function, size_t char_size);

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
__device__ inline uint4 philox4x32_10(uint4 counter, uint2 key)
{
    for (int round = 0; round < 10; ++round) {
        const unsigned hi0 = __umulhi(0xD2511F53u, counter.x), lo0 = 0xD2511F53u * counter.x;
        const unsigned hi1 = __umulhi(0xCD9E8D57u, counter.z), lo1 = 0xCD9E8D57u * counter.z;
        counter = make_uint4(hi1 ^ counter.y ^ key.x, lo1, hi0 ^ counter.w ^ key.y, lo0);
        key.x += 0x9E3779B9u;
        key.y += 0xBB67AE85u;
    }
    return counter;
}

// An index out of range is reported once the thread's rows are done, out of line: a call
// (printf's) inside the loop would make ptxas keep registers for it there.
__device__ __noinline__ void bad_index(long long i, long long src, long long num_src)
{
    printf("gather_features: index[%lld] = %lld is out of range [0, %lld)\n", i, src, num_src);
    __assertfail("0 <= index[i] < x.shape[0]", __FILE__, __LINE__, __func__, sizeof(char));
}

__device__ inline unsigned word(uint4 r, int k)
{
    return k == 0 ? r.x : k == 1 ? r.y : k == 2 ? r.z : r.w;
}

// Chunks a thread loads before it computes: 4, or 2 of 8-byte elements (at most 64 bytes, at
// most 64 registers with MIN_BLOCKS of 256 threads an SM).
template <typename T>
constexpr int unroll() { return 16 / (sizeof(T) <= 4 ? 4 : sizeof(T)); }

// out[i, f] = x[index[i], f] (x[i, f] without an index), times `scale` where the random
// word of (seed, i, f) is at least `threshold` and 0 where it is below; with no seed, kept
// as is; the scaling is computed in the accumulator type (float for 2- and 4-byte types).
template <typename T, typename I, int V>
__device__ void gather_features(const T* __restrict__ x, long long row_stride,
                                const I* __restrict__ index, long long num_rows,
                                long long num_src, long long features,
                                const long long* __restrict__ seed, long long threshold,
                                double scale, T* __restrict__ out, int lanes_log2)
{
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = (int)(thread & ((1 << lanes_log2) - 1));
    const long long step = ((long long)gridDim.x * blockDim.x) >> lanes_log2;
    const long long chunks = (features + 3) >> 2;
    uint2 key = make_uint2(0u, 0u);
    if (seed != nullptr) {
        const unsigned long long s = (unsigned long long)seed[0];
        key = make_uint2((unsigned)s, (unsigned)(s >> 32));
    }
    using A = decltype(gs::to_acc(T()));
    const A factor = (A)scale;
    const unsigned cut = (unsigned)threshold;  // below 2**32: the host makes it
    constexpr int UNROLL = unroll<T>();
    long long bad_row = -1, bad_src = 0;
    for (long long i = thread >> lanes_log2; i < num_rows; i += step) {
        long long src = i;
        if (index != nullptr) {
            src = (long long)index[i];
            if (src < 0 || src >= num_src) {
                bad_row = i;  // reported after the loop; the row is not written
                bad_src = src;
                continue;
            }
        }
        const T* row = x + src * row_stride;
        T* target = out + i * features;
        // UNROLL chunks a thread, every load issued before the first random word is made: a
        // warp then has 2 KB in flight, and 32 warps an SM stream from memory
        for (long long first = lane; first < chunks; first += (long long)UNROLL << lanes_log2) {
            gs::Vec<T, V> values[UNROLL][4 / V];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const long long f = 4 * (first + ((long long)u << lanes_log2));
#pragma unroll
                for (int j = 0; j < 4; j += V) {
                    if (f + j < features) {
                        values[u][j / V] = *reinterpret_cast<const gs::Vec<T, V>*>(row + f + j);
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const long long c = first + ((long long)u << lanes_log2);
                uint4 random = make_uint4(0u, 0u, 0u, 0u);
                if (seed != nullptr && c < chunks) {
                    random = philox4x32_10(make_uint4((unsigned)c, (unsigned)i,
                                                      (unsigned)((unsigned long long)i >> 32), 0u),
                                           key);
                }
#pragma unroll
                for (int j = 0; j < 4; j += V) {
                    if (4 * c + j < features) {
                        gs::Vec<T, V> kept = values[u][j / V];
                        if (seed != nullptr) {
#pragma unroll
                            for (int k = 0; k < V; ++k) {
                                const A value = word(random, j + k) >= cut
                                                    ? gs::to_acc(kept.v[k]) * factor : (A)0;
                                kept.v[k] = gs::from_acc<T>(value);
                            }
                        }
                        *reinterpret_cast<gs::Vec<T, V>*>(target + 4 * c + j) = kept;
                    }
                }
            }
        }
    }
    if (bad_row >= 0) {
        bad_index(bad_row, bad_src, num_src);
    }
}
