"""A first DistributedDataParallel script: the smallest complete data-parallel training loop.

    torchrun --standalone --nproc-per-node 4 workers/first_ddp.py             # one machine
    torchrun --nnodes 2 --nproc-per-node 8 --node-rank 0 \\
             --master-addr $HEAD --master-port 29500 workers/first_ddp.py      # on node 0 of 2

torchrun starts one process per GPU and tells each one who it is, in environment variables:
RANK (0 … WORLD_SIZE − 1, unique in the whole job), LOCAL_RANK (0 … nproc-per-node − 1: which
GPU of this machine) and WORLD_SIZE (nodes × processes per node). On node n,
RANK = n · nproc_per_node + LOCAL_RANK. NCCL on GPUs, gloo on a machine without them.
"""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    rank = int(os.environ["RANK"])              # this process among all processes of the job
    local_rank = int(os.environ["LOCAL_RANK"])  # this process among those on this machine
    world_size = int(os.environ["WORLD_SIZE"])  # processes in the job: nodes × GPUs per node
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)       # GPU number LOCAL_RANK of this machine
        device, backend = torch.device("cuda", local_rank), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend)            # meets the others at MASTER_ADDR:MASTER_PORT

    torch.manual_seed(0)                        # the same initial model on every rank
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1)).to(device)
    model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    data = TensorDataset(torch.randn(1024, 16), torch.randn(1024, 1))
    sampler = DistributedSampler(data)          # each rank gets a different 1/world_size of it
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    for epoch in range(2):
        sampler.set_epoch(epoch)                # a new shuffle each epoch, the same on all ranks
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()                     # DDP all-reduces gradients bucket by bucket here
            optimizer.step()                    # every rank applies the same averaged gradient
        if rank == 0:
            print(f"epoch {epoch}: loss {loss.item():.4f} (rank {rank} of {world_size})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
