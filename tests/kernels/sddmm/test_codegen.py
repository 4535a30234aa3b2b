"""g-SDDMM code generation: sources that read well, the transposed reduction replayed on the
CPU, and NVRTC builds of sampled programs for sm_80 and sm_90 without spills (no GPU)."""

from __future__ import annotations

import pytest
import torch

from gsparse.algebra import BINARY_OPS, SDDMM_OPS
from gsparse.kernels.operands import Layout
from gsparse.kernels.sddmm import Edge, EdgeTransposed, Row, RowTransposed, SddmmAlgorithm, codegen
from gsparse.runtime import compile_cuda

from graphs import named_graph
from kernels.sddmm.support import FEATURE_LENGTHS, algorithms, space
from kernels.support import assert_no_spills, needs_nvrtc, sample


def _sampled_pairs() -> list[tuple[SddmmAlgorithm, Edge | Row]]:
    pairs = []
    for i, feature_len in enumerate(FEATURE_LENGTHS):
        for j, algorithm in enumerate(algorithms(seed=i, k=3)):
            candidates = space(named_graph("sorted"), feature_len, algorithm.dtype)
            skeleton = Row if j == 0 else Edge
            schedule = sample([s for s in candidates if type(s) is skeleton], 1, seed=10 * i + j)[0]
            pairs.append((algorithm, schedule))
    return pairs


@needs_nvrtc
@pytest.mark.parametrize("schedule", [
    Edge(groups_per_block=32, lanes=8, features_per_thread=2, vector_width=4),
    Row(groups_per_block=8, lanes=8, features_per_thread=2, vector_width=4)], ids=str)
@pytest.mark.parametrize("op", SDDMM_OPS)
def test_every_operator_compiles_on_both_skeletons(op: str, schedule) -> None:
    binop = BINARY_OPS[op]
    algorithm = SddmmAlgorithm(op, "u" if binop.uses_lhs else None, "v" if binop.uses_rhs else None,
                               Layout.FULL if binop.uses_lhs else None,
                               Layout.FULL if binop.uses_rhs else None,
                               torch.bfloat16, torch.int64, has_eid=True)
    resources = compile_cuda(codegen.program(algorithm, schedule).source, arch="sm_90",
                             cache=None).resources[codegen.KERNEL]
    assert resources.spill_stores == 0 and resources.stack_bytes == 0


def _transposed_pairs() -> list[tuple[SddmmAlgorithm, RowTransposed]]:
    """Per (head length, dtype): the transposed schedule that holds the most registers
    (the batch's sums and v's features) and a sampled other, on dots whose operands
    vary in layout, target, index width and edge ids."""
    cases = [(8, torch.float32), (32, torch.float32), (100, torch.bfloat16),
             (256, torch.float64), (512, torch.float32), (512, torch.float16)]
    layouts = [(Layout.FULL, Layout.FULL), (Layout.FULL, Layout.INDEXED),
               (Layout.INDEXED, Layout.FULL)]
    targets = [("u", "v"), ("v", "u"), ("e", "v"), ("u", "e")]
    pairs = []
    for i, (feature_len, dtype) in enumerate(cases):
        candidates = [s for s in space(named_graph("sorted"), feature_len, dtype)
                      if isinstance(s, RowTransposed)]

        def weight(s: RowTransposed) -> int:
            return s.edges_per_batch + s.features_per_thread * s.vector_width

        heaviest = max(candidates, key=weight)
        # and the heaviest over feature launches, where the dtype allows them
        launched = [max(launches, key=weight)
                    for launches in [[s for s in candidates if s.features_per_launch]] if launches]
        for j, schedule in enumerate(dict.fromkeys([heaviest, *launched,
                                                    *sample(candidates, 1, seed=i)])):
            (lt, rt), (ll, rl) = targets[(i + j) % 4], layouts[(i + j) % 3]
            pairs.append((SddmmAlgorithm("dot", lt, rt, ll, rl, dtype,
                                         (torch.int32, torch.int64)[(i + j) % 2], j == 0), schedule))
    return pairs


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(("algorithm", "schedule"), _sampled_pairs() + _transposed_pairs(), ids=str)
def test_sampled_space_compiles_without_spills(arch, algorithm, schedule) -> None:
    binary = compile_cuda(codegen.program(algorithm, schedule).source, arch=arch, cache=None)
    # No stack either: the transposed skeleton's batch of sums must stay in registers;
    # __launch_bounds__(threads) keeps registers within what one block needs to launch.
    assert_no_spills(binary, codegen.KERNEL, schedule.threads)


def test_every_program_has_the_one_kernel_gsddmm() -> None:
    algorithm = SddmmAlgorithm("add", "u", "v", Layout.FULL, Layout.FULL, torch.float32,
                               torch.int32, False)
    for schedule in (Edge(), Row(), EdgeTransposed(edges_per_batch=8)):
        program = codegen.program(algorithm, schedule)
        assert list(program.kernels) == [codegen.KERNEL]
        assert program.kernels[codegen.KERNEL] == codegen.signature(algorithm)
        assert program.context == f"{algorithm} | schedule {schedule}"
        assert codegen.program(algorithm, schedule) is program  # generated once


def test_transposed_dot_source() -> None:
    algorithm = SddmmAlgorithm("dot", "u", "v", Layout.FULL, Layout.FULL, torch.float16,
                               torch.int64, has_eid=True)
    source = codegen.program(algorithm, RowTransposed(groups_per_block=4, lanes=32, vector_width=4,
                                                      edges_per_batch=8)).source
    assert "constexpr int B = 8;" in source and "A sums[B];" in source
    assert "sums[i] = keep + __shfl_xor_sync(mask, give, half, LANES);" in source
    assert "sums[0] += __shfl_xor_sync(mask, sums[0], offset, LANES);" in source
    # lane j writes edge j of the batch, in user edge order, rounded once from fp32
    assert "if (lane < B && p0 + lane < end) {" in source
    assert "const long long i = eid[p] * num_heads + h;" in source
    assert "out[i] = gs::from_acc<T>(accumulate ? gs::to_acc(out[i]) + sums[0] : sums[0]);" in source
    assert "using A = float;" in source and "A b_cache[K][V];" in source
    assert "partial += __shfl_xor_sync" not in source and "dst[p]" not in source
    # source indices are loaded a batch ahead: a batch's gathers read them from registers
    assert source.count("next_u[j] = p < end ? col[p] : 0;") == 2
    assert "const long long u = batch_u[j];" in source and "u = col[p]" not in source


def test_the_transposed_row_skeleton_refuses_element_wise_operators() -> None:
    # Other operators have no reduction to transpose: the row skeleton runs them.
    add = SddmmAlgorithm("add", "u", "v", Layout.FULL, Layout.FULL, torch.float32, torch.int32, False)
    with pytest.raises(ValueError, match="transposes a dot's reduction; add has none"):
        codegen.program(add, RowTransposed(groups_per_block=8, lanes=4, vector_width=4,
                                           edges_per_batch=4))
    assert "sums" not in codegen.program(add, Row(groups_per_block=8, lanes=4, vector_width=4)).source


def test_edge_transposed_source() -> None:
    algorithm = SddmmAlgorithm("dot", "u", "v", Layout.FULL, Layout.FULL, torch.float32,
                               torch.int32, has_eid=True)
    source = codegen.program(algorithm, EdgeTransposed(groups_per_block=4, lanes=8, vector_width=4,
                                                       edges_per_batch=8)).source
    # a warp walks a range of 256 CSR positions, striding over what the grid leaves
    assert "constexpr long long RANGE = STRIDE * 8;" in source
    assert "start += range_stride" in source and "rowptr[" not in source
    # both indices a batch ahead; v read per edge, not cached per row
    assert source.count("next_u[j] = p < end ? col[p] : 0;") == 2
    assert source.count("next_v[j] = p < end ? dst[p] : 0;") == 2
    assert "const long long v = batch_v[j];" in source and "b_cache" not in source
    assert "sums[i] = keep + __shfl_xor_sync(mask, give, half, LANES);" in source
    assert "const long long i = eid[p] * num_heads + h;" in source
    assert "out[i] = gs::from_acc<T>(accumulate ? gs::to_acc(out[i]) + sums[0] : sums[0]);" in source
    # element-wise operators walk the same batches and store each edge's messages
    mul = SddmmAlgorithm("mul", "u", "e", Layout.FULL, Layout.FULL, torch.float32,
                         torch.int64, has_eid=True)
    elementwise = codegen.program(mul, EdgeTransposed(groups_per_block=4, lanes=4, vector_width=4,
                                                      edges_per_batch=4)).source
    assert "sums" not in elementwise and "next_v" not in elementwise
    assert "const long long e = eid[p];" in elementwise
    assert "gs::store<V>(out + e * head_len + f, m);" in elementwise


def _transposed_reduce_on_the_cpu(partials: torch.Tensor, batch: int) -> torch.Tensor:
    """The transposed butterfly step for step over ``[lanes, batch]`` partial sums: what
    each lane holds in ``sums[0]`` at the end."""
    lanes = partials.shape[0]
    sums = [list(row) for row in partials.tolist()]
    step = 1
    while step < batch:
        half = batch // 2 // step
        sent = [[(s[i] if lane & half else s[i + half]) for i in range(half)]
                for lane, s in enumerate(sums)]
        sums = [[(s[i + half] if lane & half else s[i]) + sent[lane ^ half][i]
                 for i in range(half)] for lane, s in enumerate(sums)]
        step *= 2
    offset = batch
    while offset < lanes:
        sums = [[s[0] + sums[lane ^ offset][0]] for lane, s in enumerate(sums)]
        offset *= 2
    return torch.tensor([s[0] for s in sums], dtype=torch.float64)


@pytest.mark.parametrize(("lanes", "batch"), [(8, 2), (8, 8), (16, 8), (32, 8), (32, 16), (32, 32)])
def test_transposed_butterfly_leaves_edge_j_in_lane_j(lanes: int, batch: int) -> None:
    # The scheme of the generated reduction, replayed on the CPU with exact integers.
    partials = torch.randint(-1000, 1000, (lanes, batch), dtype=torch.float64)
    held = _transposed_reduce_on_the_cpu(partials, batch)
    totals = partials.sum(0)
    assert torch.equal(held, totals.repeat(lanes // batch))


def test_generated_source_reads_well() -> None:
    algorithm = SddmmAlgorithm("dot", "u", "v", Layout.FULL, Layout.INDEXED, torch.float16,
                               torch.int32, has_eid=True)
    schedule = Edge(groups_per_block=32, lanes=8, features_per_thread=2, vector_width=2)
    source = codegen.program(algorithm, schedule).source
    assert source.startswith("// gsparse g-SDDMM: dot lhs:u:full/rhs:v:indexed float16 int32 eid")
    assert f"// schedule {schedule}: {schedule.to_json()}" in source
    assert "partial += __shfl_xor_sync(mask, partial, offset, LANES);" in source
    assert "rhs_offset[f + i]" in source
    # launches after the first add their slice's products to the sum in out
    assert "out[i] = gs::from_acc<T>(accumulate ? gs::to_acc(out[i]) + partial : partial);" in source
    assert "for (int d0 = d_begin; d0 < d_end; d0 += SLICE)" in source
    # the row skeleton keeps v's features in registers and reads them from there per edge
    row = codegen.program(algorithm, Row(groups_per_block=8, lanes=8, features_per_thread=2,
                                         vector_width=2)).source
    assert "A b_cache[K][V];" in row and "const A (&b)[V] = b_cache[k];" in row
    assert "dst[p]" not in row
    # every skeleton adds to earlier launches' sums, and covers the launch's features only
    knobs = dict(groups_per_block=4, lanes=8, features_per_thread=2, vector_width=2,
                 features_per_launch=32)
    for schedule in (Row(**knobs), RowTransposed(**knobs, edges_per_batch=8),
                     EdgeTransposed(**knobs, edges_per_batch=8)):
        sliced = codegen.program(algorithm, schedule).source
        assert "accumulate ? gs::to_acc(out[i]) +" in sliced
        assert "const int base = h * head_len + d_begin;" in sliced
        assert "const int limit = h * head_len + d_end;" in sliced


def test_edge_ids_and_offsets_are_64_bit() -> None:
    algorithm = SddmmAlgorithm("mul", "e", "u", Layout.FULL, Layout.FULL, torch.float32,
                               torch.int32, has_eid=True)
    for schedule in (Edge(groups_per_block=8, lanes=32), Row(groups_per_block=8, lanes=32)):
        source = codegen.program(algorithm, schedule).source
        assert "const long long e = eid[p];" in source
        assert "const long long u = col[p];" in source
        assert "gs::store<V>(out + e * head_len + f, m);" in source
