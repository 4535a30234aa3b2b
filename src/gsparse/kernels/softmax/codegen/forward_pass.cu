// Pass 1: running maximum m and sum s of exp(z - m) over this lane's edges.
A m = NEG_INF, s = 0;
for (long long p = start + e_lane; active && p < end; p += EL) {
    const A z = gs::to_acc(x[edge(p) * num_heads + h]);
    if (z > m) {
        s = s * exp_acc(m - z) + A(1);
        m = z;
    } else if (m != NEG_INF) {  // an all -inf prefix contributes nothing yet
        s += exp_acc(z - m);
    }
}
// Merge the (m, s) pairs of the lanes that share this head.
#pragma unroll
for (int offset = HL; offset < 32; offset *= 2) {
    const A other_m = __shfl_xor_sync(0xffffffffu, m, offset);
    const A other_s = __shfl_xor_sync(0xffffffffu, s, offset);
    const A top = other_m > m ? other_m : m;
    s = (m == NEG_INF ? A(0) : s * exp_acc(m - top)) + (other_m == NEG_INF ? A(0) : other_s * exp_acc(other_m - top));
    m = top;
}
// Pass 2: normalise.
for (long long p = start + e_lane; active && p < end; p += EL) {
    const long long i = edge(p) * num_heads + h;
    y[i] = gs::from_acc<T>(exp_acc(gs::to_acc(x[i]) - m) / s);
}
