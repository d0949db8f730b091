#!/usr/bin/env python3
"""One rank of a cross-host NCCL benchmark through PyTorch (the client users run): collectives from 8 B
up, data checked, then a short DDP-style step loop and the time destroy_process_group takes.

Started once per rank (one process per GPU, or two processes on one GPU as two NCCL nodes) with
RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and LOCAL_GPU set; prints one JSON line per measurement.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist


def parse_sizes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    out = []
    for s in text.split(","):
        s = s.strip()
        out.append(int(float(s[:-1]) * units[s[-1]]) if s[-1] in units else int(s))
    return out


def timed(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)  # microseconds
    return times


def bench_collective(op, nbytes, rank, world, iters, warmup):
    n = max(1, nbytes // 4)
    dev = torch.device("cuda", torch.cuda.current_device())
    if op == "all_reduce":
        x = torch.full((n,), float(rank + 1), device=dev)
        fn = lambda: dist.all_reduce(x)
        def check():
            x.fill_(float(rank + 1))
            dist.all_reduce(x)
            return int((x != world * (world + 1) / 2).sum().item())
        bus = 2 * (world - 1) / world
    elif op == "all_gather":
        per = max(1, n // world)
        x = torch.full((per,), float(rank + 1), device=dev)
        y = torch.empty(per * world, device=dev)
        fn = lambda: dist.all_gather_into_tensor(y, x)
        expect = torch.arange(1, world + 1, device=dev, dtype=torch.float32).repeat_interleave(per)
        def check():
            dist.all_gather_into_tensor(y, x)
            return int((y != expect).sum().item())
        bus = (world - 1) / world
    elif op == "reduce_scatter":
        per = max(1, n // world)
        x = torch.full((per * world,), float(rank + 1), device=dev)
        y = torch.empty(per, device=dev)
        fn = lambda: dist.reduce_scatter_tensor(y, x)
        def check():
            dist.reduce_scatter_tensor(y, x)
            return int((y != world * (world + 1) / 2).sum().item())
        bus = (world - 1) / world
    elif op == "alltoall":
        per = max(1, n // world)
        x = torch.cat([torch.full((per,), float(rank * world + d), device=dev) for d in range(world)])
        y = torch.empty(per * world, device=dev)
        fn = lambda: dist.all_to_all_single(y, x)
        expect = torch.cat([torch.full((per,), float(s * world + rank), device=dev) for s in range(world)])
        def check():
            dist.all_to_all_single(y, x)
            return int((y != expect).sum().item())
        bus = (world - 1) / world
    else:
        raise ValueError(op)
    wrong = check()
    times = timed(fn, iters, warmup)
    wrong += check()
    med = statistics.median(times)
    return {"op": op, "bytes": n * 4, "us": med, "busbw_gbs": n * 4 * bus / med / 1e3, "wrong": wrong,
            "samples": times}


def ddp_steps(params_mib, steps):
    """Gradient all-reduce of a DDP step (bucketed as DDP does, 25 MiB buckets) after a matmul."""
    dev = torch.device("cuda", torch.cuda.current_device())
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048, bias=False) for _ in range(params_mib // 16)]).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(64, 2048, device=dev)
    times = []
    for i in range(steps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        opt.zero_grad()
        ddp(x).square().mean().backward()
        opt.step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, 0)
    return {"op": "ddp_step", "params_mib": params_mib, "ms": statistics.median(times[2:] or times),
            "params_equal": bool(torch.equal(flat, ref)), "samples": times}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--ops", default="all_reduce")
    ap.add_argument("--sizes", default="8,512K,8M,128M,1G")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--ddp-mib", type=int, default=0)
    ap.add_argument("--ddp-steps", type=int, default=12)
    a = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_GPU", "0")))
    t0 = time.perf_counter()
    dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    dist.barrier()
    init_s = time.perf_counter() - t0

    def emit(rec):
        rec.update(label=a.label, rank=rank, world=world, host=os.uname().nodename)
        if rank == 0 or rec.get("wrong") or rec.get("params_equal") is False:
            print("XHOST " + json.dumps(rec), flush=True)

    emit({"op": "init", "s": init_s})
    for op in a.ops.split(","):
        for size in parse_sizes(a.sizes):
            big = size >= (256 << 20)
            emit(bench_collective(op, size, rank, world, max(3, a.iters // 3) if big else a.iters, 1 if big else a.warmup))
    if a.ddp_mib:
        emit(ddp_steps(a.ddp_mib, a.ddp_steps))
    torch.cuda.synchronize()
    t = time.perf_counter()
    dist.destroy_process_group()
    emit({"op": "destroy", "s": time.perf_counter() - t})


if __name__ == "__main__":
    main()
