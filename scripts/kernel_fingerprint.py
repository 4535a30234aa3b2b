"""One digest of what the kernel layer produces, to prove a refactoring changed nothing.

Four sections, each a map from a canonical key to a value, and a sha256 over each:

- ``sources``: generated programs of sampled schedules of every operator x reducer x
  dtype x index dtype x edge-id x operand layout (one schedule per skeleton and feature
  length, drawn from the task's space sorted by name), as ``exact|tokens``: the sha256 of
  the source without its ``// schedule`` comment line, and of its tokens (comments and
  whitespace removed);
- ``spaces``: the names of every schedule of the space, per target, graph statistics,
  feature length, dtype and kind of task;
- ``defaults``: the hand rule's pick over the same grid, and statistics of sampled blocks
  (:func:`block_grid`), and every vector width;
- ``launches``: the launches of sampled plans on the test graphs, recorded without a GPU
  (kernel, grid, block, shared memory, every argument: scalars by value, tensors by
  content hash, operands by shape).

Run ``python scripts/kernel_fingerprint.py out.json [--compare before.json]``; the
comparison lists every key whose value differs or that only one side has.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from graphs import named_graph  # noqa: E402

from gsparse import datasets, runtime  # noqa: E402
from gsparse.algebra import BINARY_OPS, REDUCERS, SDDMM_OPS, SPMM_OPS  # noqa: E402
from gsparse.graph import GraphStats, RowStats  # noqa: E402
from gsparse.kernels import sddmm, softmax, spmm  # noqa: E402
from gsparse.kernels.operands import VECTOR_BYTES, Layout  # noqa: E402
from gsparse.target import Target  # noqa: E402

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INDEX = (torch.int32, torch.int64)
TARGETS = {
    "h100": Target("h100", "sm_90", sms=132, l2_bytes=50 << 20, shared_bytes_per_block=232_448, warps_per_sm=64),
    "a100": Target("a100", "sm_80", sms=108, l2_bytes=40 << 20, shared_bytes_per_block=166_912, warps_per_sm=64),
    # The device facts kernel tests on the CPU assumed before targets existed.
    "cpu-fallback": Target("cpu", "sm_90", sms=132, l2_bytes=50 << 20, shared_bytes_per_block=99 * 1024,
                           warps_per_sm=64),
}
FEATURES = (1, 2, 3, 4, 5, 7, 8, 16, 32, 64, 100, 128, 256, 512, 1024)
SOURCE_FEATURES = (1, 4, 64, 100)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def strip(source: str) -> str:
    lines = [line for line in source.splitlines() if not line.startswith("// schedule ")]
    exact = "\n".join(lines)
    tokens = re.sub(r"\s+", "", "\n".join(line.split("//")[0] for line in lines))
    return sha(exact) + "|" + sha(tokens)


def dname(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def lay(layout) -> str:
    return "-" if layout is None else layout.value


# ------------------------------------------------------------------ graphs and tasks


def stats(num_src, num_dst, num_edges, mean, maximum, cov) -> GraphStats:
    return GraphStats(num_src, num_dst, num_edges, RowStats(mean, maximum, cov))


def stat_grid() -> dict[str, GraphStats]:
    grid = {}
    for name, p in datasets.PRESETS.items():
        for factor in (2, 50):
            maximum = min(p.num_nodes, math.ceil(p.mean * factor))
            grid[f"{name}/max{factor}"] = stats(p.num_nodes, p.num_nodes, p.num_edges, p.mean, maximum, p.cov)
    grid["bipartite-wide"] = stats(4_000_000, 1024, 1024 * 30, 30.0, 90, 0.5)
    grid["bipartite-tall"] = stats(1024, 2_000_000, 2_000_000 * 8, 8.0, 300, 1.3)
    for kind in ("random", "square", "sorted", "int64", "long_row", "empty"):
        grid[f"test-{kind}"] = named_graph(kind).stats
    return grid


def block_grid() -> dict[str, GraphStats]:
    """Statistics of sampled blocks (what the host knows: ``RowStats.exact`` False, no COV,
    a bound on the longest row) on both sides of the hand rules' thresholds: mean rows of
    4, 8, 16, 32, 128 and 256 edges, source features that fit the L2 or not, a short and a
    long bound on the longest row."""
    grid = {}
    for num_src in (30_000, 600_000):
        for mean in (3.9, 4.0, 7.9, 8.0, 16.0, 31.9, 32.0, 128.0, 256.0):
            for num_dst, bound in ((1_024, 25), (200_000, 1_000_000)):
                edges = round(mean * num_dst)
                rows = RowStats(edges / num_dst, min(bound, edges), float("nan"), exact=False)
                grid[f"block/src{num_src}/mean{mean}/dst{num_dst}/max{bound}"] = GraphStats(
                    num_src, num_dst, edges, rows)
    return grid


SPMM_KINDS = ("copy-lhs", "lhs", "no-lhs")


def spmm_kind_task(kind: str, feature_len: int, dtype, vector_ok: int) -> spmm.SpmmTask:
    """A task standing for a kind of g-SpMM: copy_lhs, an op that reads lhs, or copy_rhs."""
    op, lhs, rhs = {"copy-lhs": ("copy_lhs", (feature_len,), None),
                    "lhs": ("mul", (feature_len,), (1,)),
                    "no-lhs": ("copy_rhs", None, (feature_len,))}[kind]
    return spmm.SpmmTask(op, "sum", lhs, rhs, (feature_len,), dtype, torch.int32, False, False, vector_ok)


def sddmm_kind_task(kind: str, feature_len: int, dtype, vector_ok: int) -> sddmm.SddmmTask:
    op = "dot" if kind == "dot" else "add"
    return sddmm.SddmmTask(op, "u", "v", (feature_len,), (feature_len,), (feature_len,), 1, dtype,
                           torch.int32, False, vector_ok)


def widest(dtype) -> int:
    return VECTOR_BYTES // dtype.itemsize


def skeleton(s) -> str:
    """The old flat schedules' skeleton names, so that samples draw the same way."""
    if isinstance(s, spmm.OutputTiled):
        return "ot"
    if isinstance(s, spmm.ColumnTiled):
        return "ct"
    if isinstance(s, spmm.SplitRows):
        return "split"
    if isinstance(s, spmm.OnePass):
        return "one"
    return str(s).split(".")[0]


def sample_by_skeleton(space, key: str, per: int):
    rng = random.Random(sha(key))
    chosen = []
    ordered = sorted(space, key=str)
    for kind in sorted({skeleton(s) for s in ordered}):
        members = [s for s in ordered if skeleton(s) == kind]
        chosen += rng.sample(members, min(per, len(members)))
    return chosen


# ------------------------------------------------------------------ sources


def spmm_algorithms():
    pairs_binary = [(Layout.FULL, Layout.FULL), (Layout.FULL, Layout.SCALAR), (Layout.SCALAR, Layout.FULL),
                    (Layout.INDEXED, Layout.FULL), (Layout.FULL, Layout.INDEXED)]
    for op in SPMM_OPS:
        binop = BINARY_OPS[op]
        if binop.uses_lhs and binop.uses_rhs:
            pairs = pairs_binary
        elif binop.uses_lhs:
            pairs = [(layout, None) for layout in Layout]
        else:
            pairs = [(None, layout) for layout in Layout]
        for lhs, rhs in pairs:
            for reduce, r in REDUCERS.items():
                for with_arg in ((False, True) if r.keeps_arg else (False,)):
                    for dtype in DTYPES:
                        for index in INDEX:
                            for eid in (False, True):
                                yield spmm.SpmmAlgorithm(op, reduce, lhs, rhs, dtype, index,
                                                         eid and (binop.uses_rhs or with_arg), with_arg)


def spmm_kind(a) -> str:
    if a.lhs_layout is None:
        return "no-lhs"
    return "copy-lhs" if a.message_is_lhs else "lhs"


def spmm_alg_key(a) -> str:
    return (f"{a.op}|{a.reduce}|arg={int(a.with_arg)}|lhs={lay(a.lhs_layout)}|rhs={lay(a.rhs_layout)}|"
            f"{dname(a.dtype)}|{dname(a.index_dtype)}|eid={int(a.has_eid)}")


def spmm_sources(out: dict) -> None:
    g = named_graph("long_row").stats
    for a in spmm_algorithms():
        for F in SOURCE_FEATURES:
            space = spmm.schedule_space(spmm_kind_task(spmm_kind(a), F, a.dtype, widest(a.dtype)), g,
                                        TARGETS["h100"])
            key = f"spmm|{spmm_alg_key(a)}|F={F}"
            for s in sample_by_skeleton(space, key, 1):
                if isinstance(s, spmm.OutputTiled) and F > s.features_covered:
                    continue
                out[f"source|{key}|{s}"] = strip(spmm.codegen.program(a, s, F).source)


def sddmm_algorithms():
    for op in SDDMM_OPS:
        binop = BINARY_OPS[op]
        for lt, rt in [(lt, rt) for lt in "uve" for rt in "uve"]:
            if (not binop.uses_lhs and lt != "u") or (not binop.uses_rhs and rt != "v"):
                continue
            pairs = [(Layout.FULL, Layout.FULL)]
            if binop.uses_lhs and binop.uses_rhs:
                pairs += [(Layout.SCALAR, Layout.FULL), (Layout.FULL, Layout.INDEXED)]
            for ll, rl in pairs:
                for dtype in DTYPES:
                    for index in INDEX:
                        for eid in (False, True):
                            yield sddmm.SddmmAlgorithm(
                                op, lt if binop.uses_lhs else None, rt if binop.uses_rhs else None,
                                ll if binop.uses_lhs else None, rl if binop.uses_rhs else None,
                                dtype, index, eid)


def sddmm_alg_key(a) -> str:
    return (f"{a.op}|lt={a.lhs_target or '-'}|rt={a.rhs_target or '-'}|lhs={lay(a.lhs_layout)}|"
            f"rhs={lay(a.rhs_layout)}|{dname(a.dtype)}|{dname(a.index_dtype)}|eid={int(a.has_eid)}")


def sddmm_sources(out: dict) -> None:
    g = named_graph("random").stats
    for a in sddmm_algorithms():
        kind = "dot" if a.is_dot else "elementwise"
        for F in SOURCE_FEATURES:
            space = sddmm.schedule_space(sddmm_kind_task(kind, F, a.dtype, widest(a.dtype)), g,
                                         TARGETS["h100"])
            key = f"sddmm|{sddmm_alg_key(a)}|F={F}"
            for s in sample_by_skeleton(space, key, 2):
                out[f"source|{key}|{s}"] = strip(sddmm.codegen.program(a, s).source)


def softmax_sources(out: dict) -> None:
    for direction in softmax.DIRECTIONS:
        for dtype in DTYPES:
            for index in INDEX:
                for eid in (False, True):
                    for lanes in (1, 2, 4, 8, 16, 32):
                        task = softmax.SoftmaxTask(direction, dtype, index, eid, lanes)
                        program = softmax.codegen.program(task, softmax.default_schedule(task, None, None))
                        key = f"softmax|{direction}|{dname(dtype)}|{dname(index)}|eid={int(eid)}|HL={lanes}"
                        out[f"source|{key}"] = strip(program.source)


# ------------------------------------------------------------------ spaces and defaults


def spaces(out: dict, grid: dict) -> None:
    for tname, target in TARGETS.items():
        for gname, st in grid.items():
            for F in FEATURES:
                for dtype in DTYPES:
                    for kind in SPMM_KINDS:
                        names = sorted(str(s) for s in spmm.schedule_space(
                            spmm_kind_task(kind, F, dtype, widest(dtype)), st, target))
                        out[f"space|spmm|{tname}|{gname}|F={F}|{dname(dtype)}|{kind}"] = sha("\n".join(names))
                    for kind in ("dot", "elementwise"):
                        names = sorted(str(s) for s in sddmm.schedule_space(
                            sddmm_kind_task(kind, F, dtype, widest(dtype)), st, target))
                        out[f"space|sddmm|{tname}|{gname}|F={F}|{dname(dtype)}|{kind}"] = sha("\n".join(names))


def defaults(out: dict, grid: dict) -> None:
    for tname, target in TARGETS.items():
        for gname, st in grid.items():
            for F in FEATURES:
                for dtype in DTYPES:
                    for vector_ok in (1, 2, 4, 8):
                        for kind in SPMM_KINDS:
                            s = spmm.default_schedule(spmm_kind_task(kind, F, dtype, vector_ok), st, target)
                            out[f"default|spmm|{tname}|{gname}|F={F}|{dname(dtype)}|v={vector_ok}|{kind}"] = str(s)
                        for kind in ("dot", "elementwise"):
                            s = sddmm.default_schedule(sddmm_kind_task(kind, F, dtype, vector_ok), st, target)
                            out[f"default|sddmm|{tname}|{gname}|F={F}|{dname(dtype)}|v={vector_ok}|{kind}"] = str(s)


# ------------------------------------------------------------------ launches


def describe_arg(arg) -> str:
    if arg is runtime.OPERAND:
        return "IN"
    if arg is None:
        return "null"
    if isinstance(arg, runtime.Scalar):
        return f"{arg.c_type}:{arg.value}"
    if isinstance(arg, torch.Tensor):
        t = arg.detach().cpu().contiguous()
        return f"{dname(t.dtype)}{list(t.shape)}:{hashlib.sha256(t.numpy().tobytes()).hexdigest()[:16]}"
    raise TypeError(arg)


class Recorder:
    """A kernel loader whose kernels log their launches instead of running."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def kernel(self, program, name, device_index):
        log = self.log

        class Kernel:
            def prepare(self, grid, block, args, *, shared_bytes=0, context=""):
                grid = grid if isinstance(grid, tuple) else (grid,)
                log.append(f"prepare {name} grid={tuple(grid)} block={block} shared={shared_bytes} "
                           + " ".join(describe_arg(a) for a in args))

                def launch(*operands, stream=None):
                    log.append(f"call {name} " + " ".join(
                        "null" if o is None else f"{dname(o.dtype)}{list(o.shape)}" for o in operands))

                return launch

        return Kernel()


def spmm_shapes(lhs, rhs, F):
    out_shape = (2, F // 2)
    shape = {Layout.FULL: out_shape, Layout.SCALAR: (1, 1), Layout.INDEXED: (2, 1), None: None}
    return shape[lhs], shape[rhs], out_shape


def launches(out: dict) -> None:
    target = TARGETS["h100"]
    recorder = Recorder()
    for gname in ("random", "sorted", "int64", "long_row", "empty"):
        for F in (2, 4, 64):
            for a in spmm_algorithms():
                g = named_graph(gname)
                if a.dtype != torch.float32 or a.reduce == "mean" or a.index_dtype != g.index_dtype:
                    continue
                if a.has_eid != (g.eid is not None and (BINARY_OPS[a.op].uses_rhs or a.with_arg)):
                    continue
                lhs_s, rhs_s, out_s = spmm_shapes(a.lhs_layout, a.rhs_layout, F)
                task = spmm.SpmmTask(a.op, a.reduce, lhs_s, rhs_s, out_s, a.dtype, a.index_dtype, a.has_eid,
                                     a.with_arg, 4)
                space = spmm.schedule_space(spmm_kind_task(spmm_kind(a), F, a.dtype, widest(a.dtype)),
                                            g.stats, target)
                key = f"spmm|{gname}|{spmm_alg_key(a)}|F={F}"
                for s in [None, *sample_by_skeleton(space, key, 1)]:
                    if isinstance(s, spmm.OutputTiled) and F > s.features_covered:
                        continue
                    recorder.log.clear()
                    g = named_graph(gname)  # fresh caches
                    try:
                        chosen = s if s is not None else spmm.default_schedule(task, g.stats, target)
                        plan = spmm.build_plan(g, task, chosen, target, loader=recorder)
                        lhs = None if lhs_s is None else torch.zeros((g.num_src, *lhs_s))
                        rhs = None if rhs_s is None else torch.zeros((g.num_edges, *rhs_s))
                        o = torch.zeros((g.num_dst, *out_s))
                        au = ae = torch.zeros((g.num_dst, *out_s), dtype=torch.int64) if a.with_arg else None
                        plan(lhs=lhs, rhs=rhs, out=o, arg_u=au, arg_e=ae)
                        value = "\n".join(recorder.log)
                    except ValueError:
                        value = "ValueError"
                    out[f"launch|{key}|{s}"] = sha(value)
    for gname in ("random", "sorted", "int64", "long_row"):
        for F in (4, 64):
            for a in sddmm_algorithms():
                g = named_graph(gname)
                if a.dtype != torch.float32 or a.index_dtype != g.index_dtype or a.has_eid != (g.eid is not None):
                    continue
                full = (2, F)
                shape = {Layout.FULL: full, Layout.SCALAR: (1, 1), Layout.INDEXED: (2, 1), None: None}
                task = sddmm.SddmmTask(a.op, a.lhs_target, a.rhs_target, shape[a.lhs_layout],
                                       shape[a.rhs_layout], full, 2 if a.is_dot else 1, a.dtype,
                                       a.index_dtype, a.has_eid, 4)
                kind = "dot" if a.is_dot else "elementwise"
                space = sddmm.schedule_space(sddmm_kind_task(kind, F if a.is_dot else 2 * F, a.dtype,
                                                             widest(a.dtype)), g.stats, target)
                key = f"sddmm|{gname}|{sddmm_alg_key(a)}|F={F}"
                for s in [None, *sample_by_skeleton(space, key, 1)]:
                    recorder.log.clear()
                    g = named_graph(gname)
                    try:
                        chosen = s if s is not None else sddmm.default_schedule(task, g.stats, target)
                        plan = sddmm.build_plan(g, task, chosen, loader=recorder)
                        plan(lhs=None, rhs=None, out=None)
                        value = "\n".join(recorder.log)
                    except ValueError:
                        value = "ValueError"
                    out[f"launch|{key}|{s}"] = sha(value)


# ------------------------------------------------------------------ main


def digest(entries: dict) -> str:
    return sha("\n".join(f"{k}={v}" for k, v in sorted(entries.items())))


def compare(before: dict, after: dict) -> int:
    """Print every difference; returns how many there are."""
    differences = 0
    for section in sorted(set(before) | set(after)):
        old, new = before.get(section, {}), after.get(section, {})
        keys = sorted(set(old) | set(new))
        changed = [k for k in keys if old.get(k) != new.get(k)]
        if section == "sources":
            tokens = [k for k in keys if (old.get(k) or "|").split("|")[1] != (new.get(k) or "|").split("|")[1]]
            exact = sum(1 for k in keys if k in old and k in new
                        and old[k].split("|")[0] == new[k].split("|")[0])
            print(f"sources: {len(keys)} keys, {exact} byte-identical (but for the schedule comment), "
                  f"{len(keys) - len(tokens)} with identical tokens, {len(tokens)} differ in tokens")
            changed = tokens
        print(f"{section}: {len(changed)} of {len(keys)} differ")
        for k in changed[:40]:
            print(f"  {k}: {old.get(k, '<missing>')} -> {new.get(k, '<missing>')}")
        differences += len(changed)
    return differences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="where to write the fingerprint (JSON)")
    parser.add_argument("--compare", help="an earlier fingerprint to compare with")
    args = parser.parse_args()
    grid = stat_grid()
    sections = {}
    for name, fill in (("sources", lambda o: (spmm_sources(o), sddmm_sources(o), softmax_sources(o))),
                       ("spaces", lambda o: spaces(o, grid)),
                       ("defaults", lambda o: defaults(o, {**grid, **block_grid()})),
                       ("launches", launches)):
        entries: dict = {}
        fill(entries)
        sections[name] = entries
        print(name, len(entries), digest(entries), flush=True)
    Path(args.out).write_text(json.dumps(sections, indent=0, sort_keys=True))
    if args.compare:
        sys.exit(1 if compare(json.loads(Path(args.compare).read_text()), sections) else 0)


if __name__ == "__main__":
    main()
