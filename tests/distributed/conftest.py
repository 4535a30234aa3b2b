import pytest
import torch
from pool import Pool


# Every distributed test runs on gloo with CPU ranks and, where GPUs are present, on NCCL
# with a GPU per rank (marked gpu: CI runs the first, the GPU machines the second).
@pytest.fixture(scope="session", params=["gloo", pytest.param("nccl", marks=pytest.mark.gpu)])
def pool(request):
    if request.param == "nccl" and not torch.cuda.is_available():
        pytest.skip("NCCL needs a CUDA GPU")
    p = Pool(backend=request.param)
    yield p
    p.close()
