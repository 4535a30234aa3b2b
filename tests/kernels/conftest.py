import pytest

from gsparse.kernels import memory


@pytest.fixture
def poisoned():
    """Kernel storage starts as NaN (floats) or -7 (integers), so every element must be
    written; yields the shapes allocated, so that a test can tell that the generated
    kernels (not another backend) produced its result."""
    with memory.poisoned() as allocations:
        yield allocations
