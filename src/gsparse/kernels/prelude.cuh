// Device helpers every generated program starts with: conversions between the storage
// type and the accumulator, and vector loads/stores of 1, 2, 4 or 8 elements. A vector
// access of V elements is one aligned load of V * sizeof(T) bytes; callers guarantee the
// alignment (the plans check pointers and row lengths before choosing V > 1).
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace gs {

__device__ __forceinline__ float to_acc(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_acc(float x) { return x; }
__device__ __forceinline__ double to_acc(double x) { return x; }

template <typename T> __device__ __forceinline__ T from_acc(float x);
template <> __device__ __forceinline__ __half from_acc<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ float from_acc<float>(float x) { return x; }
template <typename T> __device__ __forceinline__ T from_acc(double x) { return x; }

// An aligned bundle of V elements of T, moved with one memory instruction.
template <typename T, int V> struct alignas(sizeof(T) * V) Vec { T v[V]; };

template <int V, typename T, typename A>
__device__ __forceinline__ void load(const T* __restrict__ p, A (&out)[V]) {
    const Vec<T, V> bundle = *reinterpret_cast<const Vec<T, V>*>(p);
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = to_acc(bundle.v[i]);
}

template <int V, typename T, typename A>
__device__ __forceinline__ void store(T* __restrict__ p, const A (&in)[V]) {
    Vec<T, V> bundle;
#pragma unroll
    for (int i = 0; i < V; ++i) bundle.v[i] = from_acc<T>(in[i]);
    *reinterpret_cast<Vec<T, V>*>(p) = bundle;
}

}  // namespace gs
