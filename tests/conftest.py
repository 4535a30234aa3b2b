import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (none visible to PyTorch)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def pytest_configure(config):
    # No test may read the tuning records of the machine it runs on (they change which
    # schedule a call takes); the tests that need a database name their own.
    import os
    import tempfile

    os.environ.setdefault("GSPARSE_TUNING_DB", os.path.join(tempfile.mkdtemp(prefix="gsparse-tests-"),
                                                            "tuning.sqlite"))
