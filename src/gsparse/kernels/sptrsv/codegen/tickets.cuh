// Tickets for the persistent grids of the fast start (natural.cuh) and of its level pass
// (levels.cuh). Takers (warps, or subwarps of WIDTH lanes) take tickets from one counter, in
// increasing order; a taker takes its next ticket only once it has finished the one before, so a
// ticket is only ever held by a running taker. That is what the no-deadlock argument in
// natural.cuh rests on.
//
// ticket[0] is the next ticket, ticket[1] the takers that have found none left; the last taker
// to leave sets both back to zero, so the counter is ready for the next launch with no launch to
// clear it (and a captured CUDA graph replays correctly).

namespace gs {
namespace sptrsv {

// The taker's next ticket in t (the same in each of its WIDTH lanes), or false once all `count`
// are taken. Every lane of the taker calls it together.
template <int WIDTH = 32>
__device__ __forceinline__ bool take_ticket(unsigned long long* ticket, unsigned long long count,
                                            unsigned long long& t) {
    const int lane = threadIdx.x % 32;
    const int leader = lane - lane % WIDTH;
    const unsigned lanes = (0xffffffffu >> (32 - WIDTH)) << leader;  // the taker's lanes
    t = 0;
    if (lane == leader) t = atomicAdd(ticket, 1ull);
    t = __shfl_sync(lanes, t, leader);
    if (t < count) return true;
    const unsigned long long takers = (unsigned long long)gridDim.x * NW * (32 / WIDTH);
    if (lane == leader && atomicAdd(ticket + 1, 1ull) == takers - 1) {
        ticket[0] = 0;
        ticket[1] = 0;
    }
    return false;
}

}  // namespace sptrsv
}  // namespace gs
