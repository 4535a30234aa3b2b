// Pass 1: this lane's share of sum(dy * y).
A s = 0;
for (long long p = start + e_lane; active && p < end; p += EL) {
    const long long i = edge(p) * num_heads + h;
    s += gs::to_acc(dy[i]) * gs::to_acc(y[i]);
}
#pragma unroll
for (int offset = HL; offset < 32; offset *= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
// Pass 2: dz = y * (dy - sum).
for (long long p = start + e_lane; active && p < end; p += EL) {
    const long long i = edge(p) * num_heads + h;
    const A yi = gs::to_acc(y[i]);
    dz[i] = gs::from_acc<T>(yi * (gs::to_acc(dy[i]) - s));
}
