"""gsparse.nn.gather_features: x[index] with dropout in one pass. The CPU path is the
reference (NumPy's Philox4x32-10, checked against Random123's known answers); the kernel
must equal it to the bit on every dtype, index type, load width and row stride."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import gsparse._gather_features as gather
from gsparse.nn import gather_features
from gsparse.runtime import compile_cuda

from kernels.support import needs_nvrtc

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def _table(rows: int, features: int, dtype: torch.dtype = torch.float64, device: str = "cpu") -> torch.Tensor:
    gen = torch.Generator().manual_seed(rows * 1_000 + features)
    return (torch.randn(rows, features, generator=gen) + 0.5).to(dtype).to(device)


def test_philox_matches_random123s_known_answers():
    def words(counter, key):
        return [int(w[0]) for w in gather._philox([np.array([c], dtype=np.uint64) for c in counter], key)]

    assert words([0, 0, 0, 0], (0, 0)) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert words([0xFFFFFFFF] * 4, (0xFFFFFFFF, 0xFFFFFFFF)) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    assert words([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], (0xA4093822, 0x299F31D0)) == \
        [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


def test_random_words_are_one_philox_call_per_four_features_of_a_row():
    seed = -(2**62) - 12345  # negative: the key is the seed's two's-complement words
    got = gather.random_words(seed, rows=3, features=6)
    s = seed & (2**64 - 1)
    for row in range(3):
        for chunk in range(2):
            counter = [np.array([v], dtype=np.uint64) for v in (chunk, row, 0, 0)]
            want = [int(w[0]) for w in gather._philox(counter, (s & 0xFFFFFFFF, s >> 32))]
            width = min(4, 6 - 4 * chunk)
            assert [int(v) for v in got[row, 4 * chunk:4 * chunk + width]] == want[:width]


@pytest.mark.parametrize("dtype", DTYPES)
def test_without_dropout_it_is_the_gather(dtype):
    x = _table(40, 7, dtype)
    index = torch.tensor([3, 0, 39, 3, 17], dtype=torch.int32)
    for p, training in ((0.0, True), (0.7, False)):
        assert torch.equal(gather_features(x, index, p, training), x[index.long()])


@pytest.mark.parametrize("dtype", DTYPES)
def test_dropout_keeps_elements_scaled_and_drops_about_p_of_them(dtype):
    x = _table(400, 50, dtype)
    index = torch.randint(0, 400, (300,), generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    out = gather_features(x, index, 0.3)
    kept = out != 0
    assert abs(1 - kept.double().mean().item() - 0.3) < 0.01  # 15,000 elements: sd 0.004
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    want = (x[index].to(acc) * torch.tensor(1 / 0.7, dtype=acc)).to(dtype)
    assert torch.equal(out[kept], want[kept])


def test_the_mask_is_drawn_from_the_generator_and_differs_from_call_to_call():
    x, index = _table(100, 16), torch.arange(100)
    gen = torch.Generator().manual_seed(5)
    first = gather_features(x, index, 0.5, generator=gen)
    second = gather_features(x, index, 0.5, generator=gen)
    again = gather_features(x, index, 0.5, generator=torch.Generator().manual_seed(5))
    assert torch.equal(first, again) and not torch.equal(first, second)


def test_a_strided_table_is_read_in_place_and_gives_the_dense_tables_result():
    wide = _table(30, 20)
    x, index, seed = wide[:, 3:13], torch.tensor([5, 1, 29]), torch.tensor([77])
    assert x.stride() == (20, 1) and gather.rows_are_dense(x)
    assert torch.equal(gather.gather(x, index, seed, 0.4), gather.gather(x.contiguous(), index, seed, 0.4))
    assert not gather.rows_are_dense(wide.t())
    assert torch.equal(gather_features(wide.t(), index % 20, 0.0), wide.t()[index % 20])


@pytest.mark.parametrize(("shape", "index"), [
    ((5, 0), [1, 2]), ((5, 3), []), ((5,), [4, 0, 4]), ((5, 2, 3), [4, 0]), ((0, 3), []),
])
def test_every_shape_the_front_end_accepts(shape, index):
    """Empty batches, rows of no features, 1-D tables and rows of several dimensions: the
    gather's shape, and the dropout's rule on what is there."""
    x = torch.arange(1, 1 + math.prod(shape), dtype=torch.float64).reshape(shape)  # no zeros
    index = torch.tensor(index, dtype=torch.int64)
    assert torch.equal(gather_features(x, index, 0.0), x[index])
    out = gather_features(x, index, 0.5)
    kept = out != 0
    assert out.shape == x[index].shape and torch.equal(out[kept], (x[index] * 2)[kept])


def test_p_of_one_drops_everything_as_torch_does():
    x = torch.tensor([[1.0, float("nan")], [float("inf"), -2.0]], requires_grad=True)
    out = gather_features(x, torch.tensor([1, 0]), 1.0)
    assert torch.equal(out.isnan(), F.dropout(x[[1, 0]], 1.0).isnan())
    assert torch.equal(out.nan_to_num(0.0), torch.zeros(2, 2))
    out.nan_to_num(0.0).sum().backward()
    assert torch.equal(x.grad, torch.zeros(2, 2))


def test_gradients_go_through_the_same_mask_to_the_gathered_rows():
    x = _table(12, 5).requires_grad_()
    index, seed = torch.tensor([3, 3, 0, 11, 7]), torch.tensor([2**40 + 3])
    assert torch.autograd.gradcheck(lambda t: gather.gather_op(t, index, seed, 0.5), (x,))
    out = gather.gather_op(x, index, seed, 0.5)
    out.backward(torch.ones_like(out))
    scale = (out.detach() != 0).double() / 0.5
    want = torch.zeros_like(x).index_add_(0, index, scale)
    assert torch.equal(x.grad, want)


def test_the_operator_passes_torch_librarys_checks():
    x = _table(10, 6, torch.float32).requires_grad_()
    torch.library.opcheck(gather.gather_op, (x, torch.tensor([1, 9, 0]), torch.tensor([11]), 0.25))
    torch.library.opcheck(gather.gather_op, (x, None, None, 0.0))


def test_compiled_it_is_the_same_function():
    x, index = _table(20, 8, torch.float32), torch.tensor([4, 2, 19])
    seed = torch.tensor([123])
    compiled = torch.compile(gather.gather_op, fullgraph=True, backend="eager")
    assert torch.equal(compiled(x, index, seed, 0.5), gather.gather_op(x, index, seed, 0.5))
    front = torch.compile(lambda t: gather_features(t, index, 0.5), fullgraph=True, backend="eager")
    out = front(x)
    kept = out != 0
    assert torch.equal(out[kept], (x[index] * 2)[kept])


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda x, i: gather_features(x.numpy(), i), TypeError, "x must be a torch.Tensor, got ndarray"),
    (lambda x, i: gather_features(x.long(), i), TypeError, "x must have a floating dtype"),
    (lambda x, i: gather_features(x[0, 0], i), ValueError, "x must have at least one dimension"),
    (lambda x, i: gather_features(x, i.tolist()), TypeError, "index must be a torch.Tensor, got list"),
    (lambda x, i: gather_features(x, i.float()), TypeError, "index must be a 1-D int32 or int64 tensor, got a 1-D"),
    (lambda x, i: gather_features(x, i[None]), TypeError, "got a 2-D torch.int64 one"),
    (lambda x, i: gather_features(x, i, p=1.5), ValueError, "p must be a probability in [0, 1], got 1.5"),
    (lambda x, i: gather_features(x, i, p=True), ValueError, "got True"),
    (lambda x, i: gather_features(x, i, training=1), TypeError, "training must be a bool, got int"),
    (lambda x, i: gather_features(x, i, generator=3), ValueError, "generator must be a torch.Generator on cpu"),
    (lambda x, i: gather_features(x, i + 3), IndexError, "index[2] = 5 is out of range [0, 5) (x has 5 rows)"),
    (lambda x, i: gather_features(x, i - 1), IndexError, "index[0] = -1 is out of range"),
])
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error) as raised:
        call(_table(5, 3), torch.tensor([0, 1, 2]))
    assert message in str(raised.value)


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_program_compiles_every_instantiation(arch):
    binary = compile_cuda(gather.source(), arch=arch, cache=None)
    want = {gather._signature(d, i, v).name for d, i, v in gather._instantiations()}
    assert set(binary.resources) == want and len(want) == 22
    for name in want:  # four blocks of 256 threads an SM fit without spills
        resources = binary.resources[name]
        assert resources.spill_stores == resources.spill_loads == 0 and resources.registers <= 64, name


# ---------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_kernel_equals_the_reference_to_the_bit(dtype):
    for features in (1, 2, 3, 4, 5, 8, 31, 100, 602):
        for index_dtype in (torch.int32, torch.int64):
            wide = _table(300, features + 2, dtype)
            for x in (wide[:, :features], wide[:, 1:features + 1], wide[:, :features].contiguous()):
                index = torch.randint(0, 300, (257,), generator=torch.Generator().manual_seed(features))
                index = index.to(index_dtype)
                for seed, p in ((None, 0.0), (torch.tensor([-5]), 0.5), (torch.tensor([2**61 + 7]), 0.9)):
                    want = gather.gather(x, index, seed, p)
                    got = gather.gather(x.cuda(), index.cuda(), None if seed is None else seed.cuda(), p)
                    assert torch.equal(got.cpu(), want), (dtype, features, index_dtype, x.stride(), p)


@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "index"), [((5, 0), [1, 2]), ((5, 3), []), ((5,), [4, 0, 4]), ((5, 2, 3), [4, 0])])
def test_every_shape_on_a_gpu_equals_the_reference(shape, index):
    x = torch.arange(1, 1 + math.prod(shape), dtype=torch.float32).reshape(shape)
    index, seed = torch.tensor(index, dtype=torch.int64), torch.tensor([31])
    want = gather.gather(x, index, seed, 0.5)
    assert torch.equal(gather.gather(x.cuda(), index.cuda(), seed.cuda(), 0.5).cpu(), want)


@pytest.mark.gpu
def test_gradients_on_a_gpu_equal_the_cpus():
    x = _table(64, 37).requires_grad_()
    index, seed = torch.randint(0, 64, (90,)), torch.tensor([99])
    out = gather.gather_op(x, index, seed, 0.25)
    out.backward(torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape))
    xc = x.detach().cuda().requires_grad_()
    outc = gather.gather_op(xc, index.cuda(), seed.cuda(), 0.25)
    outc.backward(torch.arange(outc.numel(), dtype=out.dtype, device="cuda").reshape(out.shape))
    assert torch.equal(outc.detach().cpu(), out.detach())
    assert torch.allclose(xc.grad.cpu(), x.grad, rtol=1e-13, atol=0)  # index_add_'s order


@pytest.mark.gpu
def test_a_captured_gather_draws_a_new_mask_every_replay():
    x, index = _table(500, 64, torch.float32, "cuda"), torch.arange(0, 500, 2, device="cuda")
    gather_features(x, index, 0.5)  # loads the kernel before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = gather_features(x, index, 0.5)
    graph.replay()
    first = out.clone()
    graph.replay()
    assert not torch.equal(first, out)
    for result in (first, out):
        kept = result != 0
        assert torch.equal(result[kept], (x[index] * 2)[kept])
        assert abs(kept.float().mean().item() - 0.5) < 0.02


@pytest.mark.gpu
def test_an_index_out_of_range_stops_the_kernel_and_says_which():
    script = textwrap.dedent("""
        import torch
        from gsparse.nn import gather_features
        x = torch.randn(10, 6, device="cuda")
        gather_features(x, torch.tensor([1, 2, 10, 3], device="cuda"), 0.5)
        torch.cuda.synchronize()
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode != 0, run.stdout + run.stderr
    assert "index[2] = 10 is out of range [0, 10)" in run.stdout, run.stdout + run.stderr
    assert "device-side assert" in run.stderr, run.stdout + run.stderr
