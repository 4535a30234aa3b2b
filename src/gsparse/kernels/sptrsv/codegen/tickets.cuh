// Tickets for the persistent grids of the fast start (natural.cuh) and of its level pass
// (levels.cuh). Warps take tickets from one counter, in increasing order; a warp takes its next
// ticket only once it has finished the one before, so a ticket is only ever held by a running
// warp. That is what the no-deadlock argument in natural.cuh rests on.
//
// ticket[0] is the next ticket, ticket[1] the warps that have found none left; the last warp to
// leave sets both back to zero, so the counter is ready for the next launch with no launch to
// clear it (and a captured CUDA graph replays correctly).

namespace gs {
namespace sptrsv {

// The warp's next ticket in t (the same in every lane), or false once all `count` are taken.
// Every lane of the warp calls it together.
__device__ __forceinline__ bool take_ticket(unsigned long long* ticket, unsigned long long count,
                                            unsigned long long& t) {
    constexpr unsigned all_lanes = 0xffffffffu;
    const int lane = threadIdx.x % 32;
    t = 0;
    if (lane == 0) t = atomicAdd(ticket, 1ull);
    t = __shfl_sync(all_lanes, t, 0);
    if (t < count) return true;
    const unsigned long long warps = (unsigned long long)gridDim.x * NW;
    if (lane == 0 && atomicAdd(ticket + 1, 1ull) == warps - 1) {
        ticket[0] = 0;
        ticket[1] = 0;
    }
    return false;
}

}  // namespace sptrsv
}  // namespace gs
