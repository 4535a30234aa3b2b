"""The CUDA allocator's trace of two distributed GCN epochs on rank 0, replayed to the peak:
the blocks live there, grouped by the Python frames that allocated them.

PYTHONPATH=src torchrun --nproc-per-node 4 scripts/dist_memory_snapshot.py --graph papers100m-like@0.1
"""
import argparse
import collections
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from gsparse.distributed import train as T


def where(frames):
    keep = [f for f in frames if ("gsparse" in f["filename"] or "dist_memory_snapshot" in f["filename"])]
    return " < ".join(f"{os.path.basename(f['filename'])}:{f['line']}({f['name']})" for f in keep[:4]) or \
        "(no gsparse frame) " + " < ".join(f"{os.path.basename(f['filename'])}:{f['line']}" for f in frames[:3])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--graph", default="papers100m-like@0.05")
    args = p.parse_args()
    device, group = T.init("auto")
    rank = dist.get_rank()
    data = T.load(args.graph, group=group, device=device)
    torch.manual_seed(0)
    model = T.GCN(data.x.shape[1], 256, data.num_classes).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device], process_group=dist.group.WORLD)
    opt = torch.optim.Adam(ddp.parameters(), lr=0.01)
    rows = data.graph.num_dst
    for epoch in range(3):
        if epoch == 1:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(device)
            if rank == 0:
                torch.cuda.memory._record_memory_history(max_entries=500000, stacks="python")
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(data.x, data.graph)[data.train_mask], data.y[data.train_mask], reduction="sum")
        loss.backward()
        opt.step()
        del loss
    torch.cuda.synchronize()
    if rank == 0:
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        trace = snap["device_traces"][device.index]
        # Blocks alive at the end that no trace entry allocated were alive all along.
        traced = {e["addr"] for e in trace if e["action"] == "alloc"}
        start = 0
        preexisting = collections.Counter()
        for seg in snap["segments"]:
            if seg.get("device", device.index) != device.index:
                continue
            addr = seg["address"]
            for blk in seg["blocks"]:
                if blk["state"] == "active_allocated" and addr not in traced:
                    start += blk["size"]
                    preexisting[f"{blk['size'] / rows:.0f} B/row block"] += blk["size"]
                addr += blk["size"]
        live, cur, peak, at_peak = {}, 0, 0, None
        for e in trace:
            a = e["action"]
            if a == "alloc":
                live[e["addr"]] = (e["size"], where(e.get("frames", [])))
                cur += e["size"]
                if cur > peak:
                    peak, at_peak = cur, dict(live)
            elif a in ("free_requested",) and e["addr"] in live:
                cur -= live.pop(e["addr"])[0]
        print(f"rows {rows}; CUDA max allocated {torch.cuda.max_memory_allocated(device) / rows:.0f} B/row; "
              f"at recording start (alive, survives the epoch) {start / rows:.0f} B/row; traced peak above it "
              f"{peak / rows:.0f} B/row")
        for label, size in preexisting.most_common(12):
            print(f"  before {size / rows:7.0f} B/row  {label}")
        by = collections.Counter()
        for size, label in (at_peak or {}).values():
            by[label] += size
        for label, size in by.most_common(25):
            print(f"  peak   {size / rows:7.0f} B/row  {label}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
