// Pass 1: this lane's share of sum(dy * y). Whole batches of U edges issue their loads
// before they are folded, the rest go one at a time; edge order either way, so the sum is
// the same for every U.
const auto product = [&](long long p) -> A {
    const long long i = edge(p) * num_heads + h;
    return gs::to_acc(dy[i]) * gs::to_acc(y[i]);
};
A s = 0;
long long p = start + e_lane;
for (; active && p + (U - 1) * EL < end; p += U * EL) {
    A t[U];
#pragma unroll
    for (int u = 0; u < U; ++u) t[u] = product(p + u * EL);
#pragma unroll
    for (int u = 0; u < U; ++u) s += t[u];
}
for (; active && p < end; p += EL) s += product(p);
#pragma unroll
for (int offset = HL; offset < RL; offset *= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
// Pass 2: dz = y * (dy - sum), batched the same way, with each edge's factor(p) loaded in
// the batch; store(i, dz, factor) writes it.
p = start + e_lane;
for (; active && p + (U - 1) * EL < end; p += U * EL) {
    long long i_u[U];
    A y_u[U], dy_u[U], f_u[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        i_u[u] = edge(p + u * EL) * num_heads + h;
        y_u[u] = gs::to_acc(y[i_u[u]]);
        dy_u[u] = gs::to_acc(dy[i_u[u]]);
        f_u[u] = factor(p + u * EL);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) store(i_u[u], y_u[u] * (dy_u[u] - s), f_u[u]);
}
for (; active && p < end; p += EL) {
    const long long i = edge(p) * num_heads + h;
    store(i, gs::to_acc(y[i]) * (gs::to_acc(dy[i]) - s), factor(p));
}
