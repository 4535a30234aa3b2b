// Pass 1: running maximum m and sum s of exp(z - m) over this lane's edges (z: logit(i, p) of
// the edge at CSR position p, whose value sits at i; keep(i, z) leaves it where pass 2's
// relogit(i, p) reads it back, or relogit computes it again). Whole batches of U edges issue
// their loads before they are folded, the rest go one at a time; edge order either way, so m
// and s are the same for every U.
A m = NEG_INF, s = 0;
const auto fold = [&](A z) {
    if (z > m) {
        s = s * exp_acc(m - z) + A(1);
        m = z;
    } else if (m != NEG_INF) {  // an all -inf prefix contributes nothing yet
        s += exp_acc(z - m);
    }
};
long long p = start + e_lane;
for (; active && p + (U - 1) * EL < end; p += U * EL) {
    long long i_u[U];
    A z_u[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        i_u[u] = edge(p + u * EL) * num_heads + h;
        z_u[u] = logit(i_u[u], p + u * EL);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
        keep(i_u[u], z_u[u]);
        fold(z_u[u]);
    }
}
for (; active && p < end; p += EL) {
    const long long i = edge(p) * num_heads + h;
    const A z = logit(i, p);
    keep(i, z);
    fold(z);
}
// Merge the (m, s) pairs of the lanes that share this head.
#pragma unroll
for (int offset = HL; offset < RL; offset *= 2) {
    const A other_m = __shfl_xor_sync(0xffffffffu, m, offset);
    const A other_s = __shfl_xor_sync(0xffffffffu, s, offset);
    const A top = other_m > m ? other_m : m;
    s = (m == NEG_INF ? A(0) : s * exp_acc(m - top)) + (other_m == NEG_INF ? A(0) : other_s * exp_acc(other_m - top));
    m = top;
}
// Pass 2: normalise, batched the same way.
p = start + e_lane;
for (; active && p + (U - 1) * EL < end; p += U * EL) {
    long long i_u[U];
    A z_u[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        i_u[u] = edge(p + u * EL) * num_heads + h;
        z_u[u] = relogit(i_u[u], p + u * EL);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) y[i_u[u]] = gs::from_acc<T>(exp_acc(z_u[u] - m) / s);
}
for (; active && p < end; p += EL) {
    const long long i = edge(p) * num_heads + h;
    y[i] = gs::from_acc<T>(exp_acc(relogit(i, p) - m) / s);
}
