"""The ``gsparse`` command: ``gsparse info`` and ``gsparse example``."""

from __future__ import annotations

import argparse
import platform
import sys
import time
from importlib import metadata

import torch


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def info() -> dict[str, str]:
    """What gsparse can use on this machine: device, CUDA, NVRTC, cache, versions."""
    from . import __version__, runtime

    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        device = f"{torch.cuda.get_device_name()} (sm_{major}{minor})"
    else:
        device = "cpu (no CUDA device visible to PyTorch)"
    nvrtc = runtime.nvrtc_version()
    return {
        "gsparse": __version__,
        "device": device,
        "torch": f"{torch.__version__} (CUDA {torch.version.cuda or 'none'})",
        "nvrtc": "unavailable (pip install 'gsparse[cuda]')" if nvrtc is None
        else f"{nvrtc[0]}.{nvrtc[1]}, targets {', '.join(runtime.supported_archs())}",
        "cuda-bindings": _version("cuda-bindings"),
        "cache directory": str(runtime.default_cache_dir()),
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
    }


def example(device: str) -> int:
    """A worked example: weighted neighbour sum on a random graph, checked against float64."""
    import gsparse
    from gsparse.testing import gspmm_ref

    gen = torch.Generator().manual_seed(0)
    num_nodes, num_edges, features = 2_000, 20_000, 64
    edge_index = torch.randint(num_nodes, (2, num_edges), generator=gen)
    g = gsparse.Graph.from_edge_index(edge_index, num_nodes, num_nodes).to(device)
    x = torch.randn(num_nodes, features, generator=gen).to(device)
    w = torch.rand(num_edges, generator=gen).to(device)
    print(g)
    print(f"row lengths: {g.row_stats}")
    start = time.perf_counter()
    out = gsparse.u_mul_e_sum(g, x, w)
    if out.is_cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    ref = gspmm_ref(g.to("cpu"), "mul", "sum", x.cpu(), w.cpu())
    err = float((out.cpu().double() - ref).norm() / ref.norm())
    print(f"u_mul_e_sum: output {tuple(out.shape)} in {elapsed * 1e3:.1f} ms, "
          f"relative error vs float64 reference {err:.2e}")
    return 0 if err < 1e-5 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gsparse", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="show device, CUDA/NVRTC availability, cache directory, versions")
    ex = sub.add_parser("example", help="run a small worked example and check it against float64")
    ex.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    if args.command == "info":
        rows = info()
        width = max(map(len, rows))
        for key, value in rows.items():
            print(f"{key:<{width}}  {value}")
        return 0
    return example(args.device)


if __name__ == "__main__":
    sys.exit(main())
