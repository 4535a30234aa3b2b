"""Where a small factor's level goes in one block: a CuPy stand-in of the one-block solve,
with its variants, and a per-row clock trace (no gsparse kernel is changed by it).

    PYTHONPATH=src python3 scripts/sptrsv_one_block_trace.py cora citeseer syn:33:2708
    PYTHONPATH=src python3 scripts/sptrsv_one_block_trace.py trace syn:33:2708 cora

The stand-in solves a lower factor with one thread per row (rows r = t, t + T, ...), ``x``
in shared memory polled by value as gsparse's one block does, in these variants:
``staged`` (the whole factor copied to shared memory first), ``CONV`` (a warp-convergent
loop: each lane takes the entries that are ready, none spins alone), ``SLEEP`` (exponential
back-off up to that many ns while a value is not ready), ``BFIRST`` (the row's right side
read before its waits); K columns per block, one block per column group. Each line is the
device time per solve (CUDA events over 200 back-to-back launches behind a device wait,
median of 5), next to gsparse's fast start and cuSPARSE in the same process.
``syn:D:N`` is an N-row factor whose row r depends on row r - D only (a chain of N / D steps).
``trace`` records each row's start and end (``clock64``) and walks the critical path back
from the last row: the cycles from a dependency's end to its dependent's end.
"""
import sys, statistics
import numpy as np, cupy as cp, torch
from scipy.sparse.linalg import spsolve_triangular
from gsparse.bench import sptrsv as B, cusparse_triangular
from gsparse.tune.measure import time_calls

SRC = r'''
#define SENT 0xFFF4DEADBEEF1234ull
extern "C" __global__ void __launch_bounds__(1024) solve(const int* __restrict__ crow, const int* __restrict__ col,
    const double* __restrict__ val, const double* __restrict__ b, double* __restrict__ x, int n, int nnz, int kall, long long* tr) {
  extern __shared__ unsigned long long sm[];
  volatile unsigned long long* xs = sm;               // n * KB
  const int c0 = blockIdx.x * KB;
#if STAGED
  double* s_val = (double*)(sm + (size_t)n * KB);
  int* s_crow = (int*)(s_val + nnz);
  int* s_col = s_crow + n + 1;
  for (int i = threadIdx.x; i < nnz; i += blockDim.x) { s_val[i] = val[i]; s_col[i] = col[i]; }
  for (int i = threadIdx.x; i <= n; i += blockDim.x) s_crow[i] = crow[i];
  #define CROW s_crow
  #define COL s_col
  #define VAL s_val
#else
  #define CROW crow
  #define COL col
  #define VAL val
#endif
  for (int i = threadIdx.x; i < n * KB; i += blockDim.x) xs[i] = SENT;
  __syncthreads();
#if CONV
  // convergent: every lane consumes the entries that are ready and never spins alone
  int r = threadIdx.x;
  bool active = r < n;
  int s = 0, e1 = 0; double inv = 0; double acc[KB];
  #pragma unroll
  for (int c = 0; c < KB; ++c) acc[c] = 0;
  if (active) { s = CROW[r]; e1 = CROW[r + 1] - 1; inv = 1.0 / VAL[e1]; }
  while (__any_sync(0xffffffffu, active)) {
    if (active) {
      while (s < e1) {
        const int j = COL[s];
        unsigned long long bits[KB];
        bool ready = true;
        #pragma unroll
        for (int c = 0; c < KB; ++c) { bits[c] = xs[j * KB + c]; ready = ready && bits[c] != SENT; }
        if (!ready) break;
        const double v = VAL[s];
        #pragma unroll
        for (int c = 0; c < KB; ++c) acc[c] += v * __longlong_as_double((long long)bits[c]);
        ++s;
      }
      if (s == e1) {
        #pragma unroll
        for (int c = 0; c < KB; ++c) {
          const double xv = (b[(size_t)r * kall + c0 + c] - acc[c]) * inv;
          xs[r * KB + c] = (unsigned long long)__double_as_longlong(xv);
          x[(size_t)r * kall + c0 + c] = xv;
          acc[c] = 0;
        }
        r += blockDim.x;
        active = r < n;
        if (active) { s = CROW[r]; e1 = CROW[r + 1] - 1; inv = 1.0 / VAL[e1]; }
      }
    }
  }
#else
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    const long long t_begin = clock64();
    const int s = CROW[r], e = CROW[r + 1];
    const double inv = 1.0 / VAL[e - 1];
    double acc[KB];
#if BFIRST
    double bv[KB];
    #pragma unroll
    for (int c = 0; c < KB; ++c) bv[c] = b[(size_t)r * kall + c0 + c];
#endif
    #pragma unroll
    for (int c = 0; c < KB; ++c) acc[c] = 0;
    for (int p = s; p < e - 1; ++p) {
      const int j = COL[p]; const double v = VAL[p];
      #pragma unroll
      for (int c = 0; c < KB; ++c) {
        unsigned long long bits = xs[j * KB + c];
#if SLEEP
        unsigned ns = 16;
#endif
        while (bits == SENT) {
#if SLEEP
          __nanosleep(ns);
          ns = ns * 2 < SLEEP ? ns * 2 : SLEEP;
#endif
          bits = xs[j * KB + c];
        }
        acc[c] += v * __longlong_as_double((long long)bits);
      }
    }
    #pragma unroll
    for (int c = 0; c < KB; ++c) {
#if BFIRST
      const double xv = (bv[c] - acc[c]) * inv;
#else
      const double xv = (b[(size_t)r * kall + c0 + c] - acc[c]) * inv;
#endif
      xs[r * KB + c] = (unsigned long long)__double_as_longlong(xv);
      x[(size_t)r * kall + c0 + c] = xv;
    }
    if (tr) { tr[2 * r] = t_begin; tr[2 * r + 1] = clock64(); }
  }
#endif
}
extern "C" __global__ void spin(long long cycles) { long long t = clock64(); while (clock64() - t < cycles) {} }
'''

_cache = {}
def kernel(staged, pf, kb):
    key = (staged, pf, kb)
    conv, sleep, bfirst = pf
    if key not in _cache:
        m = cp.RawModule(code=SRC, options=(f"-DSTAGED={staged}", f"-DCONV={conv}", f"-DSLEEP={sleep}", f"-DBFIRST={bfirst}", f"-DKB={kb}", "-arch=sm_90"))
        _cache[key] = (m.get_function("solve"), m.get_function("spin"))
    return _cache[key]


def run(mat, k, staged, pf, kb, threads, reps=200):
    n, nnz = mat.shape[0], mat.nnz
    shared = n * kb * 8 + (nnz * 12 + (n + 1) * 4 if staged else 0)
    if shared > 227 * 1024:
        return None
    f, spin = kernel(staged, pf, kb)
    f.max_dynamic_shared_size_bytes = shared
    crow = cp.asarray(mat.indptr.astype(np.int32)); col = cp.asarray(mat.indices.astype(np.int32))
    val = cp.asarray(mat.data.astype(np.float64))
    rng = np.random.default_rng(0)
    bh = rng.standard_normal((n, k))
    b = cp.asarray(bh); x = cp.zeros((n, k))
    args = (crow, col, val, b, x, np.int32(n), np.int32(nnz), np.int32(k), np.uint64(0))
    grid = (k // kb,)
    f(grid, (threads,), args, shared_mem=shared)
    cp.cuda.Device().synchronize()
    ref = spsolve_triangular(mat.tocsr(), bh, lower=True)
    err = float(np.abs(cp.asnumpy(x) - ref).max() / max(np.abs(ref).max(), 1e-300))
    times = []
    for _ in range(5):
        spin((1,), (1,), (np.int64(2_000_000 * 5),))
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        for _ in range(reps):
            f(grid, (threads,), args, shared_mem=shared)
        e.record(); e.synchronize()
        times.append(cp.cuda.get_elapsed_time(s, e) * 1e3 / reps)
    return statistics.median(times), err


def main(specs):
    for spec in specs:
        if spec.startswith("syn"):
            import scipy.sparse as sp
            _, d, n = spec.split(":"); d, n = int(d), int(n)
            rows = np.arange(d, n) if d else np.array([], int)
            mat = sp.csr_matrix((np.r_[np.full(n, 4.0), -np.ones(len(rows))],
                                 (np.r_[np.arange(n), rows], np.r_[np.arange(n), rows - d])), shape=(n, n))
        else:
            _, mat = B.load_matrix(spec)
        mat = mat.tocsr(); mat.sort_indices()
        device = torch.device("cuda")
        tcrow = torch.from_numpy(mat.indptr.astype(np.int64)).to(device)
        tcol = torch.from_numpy(mat.indices.astype(np.int64)).to(device)
        tval = torch.from_numpy(mat.data).to(device)
        n = mat.shape[0]
        for k in ((1,) if spec.startswith('syn') else (1, 16)):
            rhs = torch.randn((n, k), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
            tb = (rhs[:, 0] if k == 1 else rhs).to(device).contiguous()
            fast, _ = B._fast_start(tcrow, tcol, tval, tb, k, False, device, None)
            spsm = cusparse_triangular.CuSparseSpSM(tcrow.int(), tcol.int(), tval, n, True, False, False, k)
            spsm.analyse(); spsm.load(tb)
            def cus():
                spsm.solve(); return spsm.result(k == 1)
            fast(); cus()
            ref_line = "   gsparse fast start %.2f us, cuSPARSE %.2f us (device)" % tuple(
                time_calls(fn, [()], device, budget_s=0.1, hide_host=True).median_ms * 1e3 for fn in (fast, cus))
            out = []
            for staged in (0, 1) if mat.nnz < 15000 else (0,):
                for pf in ((0, 0, 0), (1, 0, 0), (0, 128, 0), (0, 0, 1)):
                    for kb in ((1,) if k == 1 else (1, 2, 4)):
                        for threads in (512, 1024):
                            res = run(mat, k, staged, pf, kb, threads)
                            if res is None:
                                continue
                            out.append((res[0], f"staged={staged} conv,sleep,bfirst={pf} kb={kb} T={threads}", res[1]))
            out.sort()
            print(f"{spec} n={mat.shape[0]} nnz={mat.nnz} k={k}: best {len(out)} of variants (us, err)")
            print(ref_line)
            for t, name, err in out[:8]:
                print(f"   {t:7.2f}  {name}  err={err:.1e}")
            if not out: continue
            worst = out[-1]
            print(f"   worst {worst[0]:7.2f} {worst[1]}")





def trace(spec, staged=1, bfirst=1, threads=1024):
    import scipy.sparse as sp
    if spec.startswith("syn"):
        _, d, n = spec.split(":"); d, n = int(d), int(n)
        rows = np.arange(d, n)
        mat = sp.csr_matrix((np.r_[np.full(n, 4.0), -np.ones(len(rows))],
                             (np.r_[np.arange(n), rows], np.r_[np.arange(n), rows - d])), shape=(n, n))
    else:
        _, mat = B.load_matrix(spec)
    mat = mat.tocsr(); mat.sort_indices(); n, nnz = mat.shape[0], mat.nnz
    f, _ = kernel(staged, (0, 0, bfirst), 1)
    shared = n * 8 + (nnz * 12 + (n + 1) * 4 if staged else 0)
    f.max_dynamic_shared_size_bytes = shared
    crow = cp.asarray(mat.indptr.astype(np.int32)); col = cp.asarray(mat.indices.astype(np.int32))
    val = cp.asarray(mat.data.astype(np.float64)); b = cp.asarray(np.random.default_rng(0).standard_normal((n, 1)))
    x = cp.zeros((n, 1)); tr = cp.zeros(2 * n, dtype=cp.int64)
    for _ in range(3):
        f((1,), (threads,), (crow, col, val, b, x, np.int32(n), np.int32(nnz), np.int32(1), tr), shared_mem=shared)
    cp.cuda.Device().synchronize()
    t = cp.asnumpy(tr).reshape(n, 2); t0 = t[:, 0].min(); begin, done = t[:, 0] - t0, t[:, 1] - t0
    ip, ix = mat.indptr, mat.indices
    lag = []
    for r in range(n):
        d = ix[ip[r]:ip[r + 1]]; d = d[d < r]
        dep = done[d].max() if len(d) else 0
        avail = max(dep, begin[r])
        lag.append(done[r] - avail)
    lag = np.array(lag)
    # critical path: walk back from the last row
    r = int(np.argmax(done)); path = []
    while True:
        d = ix[ip[r]:ip[r + 1]]; d = d[d < r]
        dep = int(d[np.argmax(done[d])]) if len(d) else -1
        if dep >= 0 and done[dep] >= begin[r]:
            path.append(("dep", r, int(done[r] - done[dep]))); r = dep
        else:
            path.append(("start", r, int(done[r] - begin[r]))); 
            prev = r - threads
            if prev >= 0 and r % threads == prev % threads and done[prev] <= begin[r] + 50:
                path.append(("thread-gap", r, int(begin[r] - done[prev]))); r = prev
            else:
                break
    print(f"{spec}: total cycles {done.max()}, first begin->last done; rows {n}; lag (cycles) median {np.median(lag):.0f} p90 {np.percentile(lag, 90):.0f} max {lag.max():.0f}")
    steps = [p[2] for p in path if p[0] == "dep"]
    print(f"   critical path {len(path)} links: dep-steps {len(steps)} median {np.median(steps) if steps else 0:.0f} cycles; first link {path[-1]}")
    print("   last links:", path[:6])


if __name__ == "__main__":
    if sys.argv[1] == "trace":
        for spec in sys.argv[2:]:
            for staged, bfirst in ((1, 1), (0, 0)):
                print("staged", staged, "bfirst", bfirst); trace(spec, staged, bfirst)
    else:
        main(sys.argv[1:])
