import pytest
from pool import Pool


@pytest.fixture(scope="session")
def pool():
    p = Pool()
    yield p
    p.close()
