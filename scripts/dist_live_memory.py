"""Where a distributed GCN epoch's memory goes: live tensor storage bytes per rank, traced
on any device (CPU under gloo too), with the live set at the peak of each phase.

It sees what the dispatcher returns on this thread: on a GPU not the backward, which the
CUDA autograd engine runs on a thread of its own (scripts/dist_memory_snapshot.py reads
the allocator instead), nor the temporaries inside one operator.

PYTHONPATH=src torchrun --nproc-per-node 4 scripts/dist_live_memory.py --graph papers100m-like@0.002
"""
import argparse
import collections
import os
import sys
import traceback
import weakref

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from gsparse.distributed import train as T


def _where() -> str:
    frames = [f for f in traceback.extract_stack()[:-3]
              if ("gsparse" in f.filename or "dist_live_memory" in f.filename) and "_python_dispatch" not in f.filename]
    return " < ".join(f"{os.path.basename(f.filename)}:{f.lineno}" for f in frames[-3:][::-1])


class LiveStorage(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.live = {}
        self.current = 0
        self.peak = 0
        self.at_peak = []
        self.phase = "?"
        self.phase_peak = {}

    def _free(self, key):
        entry = self.live.pop(key, None)
        if entry is not None:
            self.current -= entry[0]

    def reset_peak(self):
        self.peak = self.current
        self.at_peak = list(self.live.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                s = t.untyped_storage()
                key = s._cdata
                if key in self.live or s.nbytes() == 0:
                    continue
                self.live[key] = (s.nbytes(), f"{self.phase} {func.__name__} {tuple(t.shape)} {t.dtype} @ {_where()}")
                self.current += s.nbytes()
                weakref.finalize(s, self._free, key)
        phase = self.phase[:3]
        if self.current > self.phase_peak.get(phase, (0,))[0]:
            self.phase_peak[phase] = (self.current, list(self.live.values()))
        if self.current > self.peak:
            self.peak = self.current
            self.at_peak = list(self.live.values())
        return out


def _print_by_label(live, rows: int, top: int) -> None:
    """The live bytes per row of the ``top`` largest labels, then the rest."""
    by = collections.Counter()
    for nbytes, label in live:
        by[label] += nbytes
    for label, nbytes in by.most_common(top):
        print(f"{nbytes / rows:8.0f} B/row  {label}")
    rest = sum(by.values()) - sum(b for _, b in by.most_common(top))
    print(f"{rest / rows:8.0f} B/row  (the rest)")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--graph", default="papers100m-like@0.002")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--recompute-first", action="store_true", help="GCN(recompute_first=True)")
    args = p.parse_args()
    device, group = T.init("auto")
    rank = dist.get_rank()
    mode = LiveStorage()
    with mode:
        mode.phase = "load"
        data = T.load(args.graph, group=group, device=device)
        built = mode.current
        torch.manual_seed(0)
        model = T.GCN(data.x.shape[1], args.hidden, data.num_classes, recompute_first=args.recompute_first).to(device)
        ddp = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None, process_group=dist.group.WORLD)
        opt = torch.optim.Adam(ddp.parameters(), lr=0.01)
        load_peak = mode.peak
        rows = data.graph.num_dst
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        for epoch in range(args.epochs):
            mode.reset_peak()
            mode.phase = f"fwd{epoch}"
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(ddp(data.x, data.graph)[data.train_mask], data.y[data.train_mask],
                                   reduction="sum")
            mode.phase = f"bwd{epoch}"
            loss.backward()
            mode.phase = f"opt{epoch}"
            opt.step()
            del loss
    if rank == 0:
        print(f"rows {rows}, halo {data.graph.num_halo}, edges {data.graph.num_edges}")
        print(f"after load: {built / rows:.0f} B/row live, load peak {load_peak / rows:.0f} B/row")
        print(f"training peak: {mode.peak / rows:.0f} B/row ({mode.peak / 2**20:.1f} MiB)")
        if device.type == "cuda":
            allocated = torch.cuda.max_memory_allocated(device)
            print(f"CUDA max allocated in training: {allocated / rows:.0f} B/row ({allocated / 2**30:.2f} GiB)")
        _print_by_label(mode.at_peak, rows, 40)
        for phase, (peak, live) in mode.phase_peak.items():
            print(f"== peak in phase {phase}: {peak / rows:.0f} B/row")
            _print_by_label(live, rows, 14)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
