"""All-reduce across every GPU of the job through NCCL (and so through ICN); checks the sum on each rank."""
import os

import torch
import torch.distributed as dist


def main() -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    for numel in (1 << 10, 1 << 20, 1 << 26):
        x = torch.full((numel,), float(rank + 1), device="cuda")
        dist.all_reduce(x)
        expected = world * (world + 1) / 2
        if not torch.all(x == expected):
            raise SystemExit(f"rank {rank}: all_reduce of {numel} floats gave {x[0].item()}, expected {expected}")
    dist.barrier()
    if rank == 0:
        print(f"all_reduce correct on {world} ranks")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
