import pytest
import torch


@pytest.fixture(autouse=True)
def _one_intra_op_thread():
    """These tests run thousands of tiny ops; with two OpenMP threads on a shared 2-core
    machine each op can wait milliseconds for a busy core (measured: repeat_interleave of 5
    elements 12 ms with 2 threads, 14 us with 1). One thread keeps the suite's time honest."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
