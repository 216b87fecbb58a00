"""A weight-update server, in the pattern of an inference engine's parameter server: one
TCPStore for the job's life; each update makes the process group through a new PrefixStore of
it (torch's init with ``store=``), may make a subgroup (on torch, through comm.py), and ends
both; a barrier on the store itself (torch's private ``_store_based_barrier``) closes it. Ported
badly, a second ``init`` after ``destroy_process_group`` would fail, or destroying the subgroup
would end the world.

    compat launch -n 2 --framework torch server.py
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from typing import Any

import comm as dist
import torch
import torch.distributed


class WeightServer:
    def __init__(self) -> None:
        self.rank = int(os.environ["RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])
        # the launcher's port is the job's; the store takes the next one
        self.store = torch.distributed.TCPStore(
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]) + 1,
            self.world_size,
            timeout=timedelta(seconds=60),
            is_master=self.rank == 0,
        )
        self.updates = 0

    def init_process_group(self) -> None:
        self.updates += 1
        sub_store = torch.distributed.PrefixStore(f"update-{self.updates}", self.store)
        dist.init_process_group(
            self.rank, self.world_size, sub_store, backend="gloo", timeout=timedelta(seconds=60)
        )

    def store_barrier(self) -> None:
        torch.distributed.distributed_c10d._store_based_barrier(
            rank=self.rank,
            store=self.store,
            group_name=f"server-barrier-{self.updates}",
            rendezvous_count=self.world_size,
            timeout=timedelta(seconds=60),
        )

    def update(self, step: int, ranks: list[int] | None = None) -> dict[str, Any]:
        group = None
        result: dict[str, Any] = {}
        try:
            if not dist.is_initialized():
                self.init_process_group()
            group = dist.new_group(ranks) if ranks else None
            metas: list[Any] = [None] * self.world_size
            dist.all_gather_object(metas, {"rank": self.rank, "step": step})
            ready = torch.tensor([1 + self.rank + step], dtype=torch.int64)
            dist.all_reduce(ready, op=torch.distributed.ReduceOp.MIN, group=group)
            bucket = torch.full((3,), float(10 * self.rank + step))
            dist.broadcast(bucket, src=self.world_size - 1, group=group)
            codes = torch.tensor([self.rank + 2], dtype=torch.int64)
            dist.all_reduce(codes, op=torch.distributed.ReduceOp.SUM, group=group)
            dist.barrier(group=group)
            self.store_barrier()
            result.update(
                metas=metas, ready=ready.tolist(), bucket=bucket.tolist(), codes=codes.tolist()
            )
        finally:
            if group:
                dist.destroy_process_group(group)
                # the subgroup is gone, the world is not
                world = torch.ones(1)
                dist.all_reduce(world)
                result["world_after_subgroup"] = world.item()
            if dist.is_initialized():
                dist.destroy_process_group()
        result["initialized_after"] = dist.is_initialized()
        return result


def main() -> None:
    server = WeightServer()
    updates = [server.update(0), server.update(1, ranks=[0, 1]), server.update(2)]
    line = json.dumps({"rank": server.rank, "updates": updates}, sort_keys=True)
    sys.stdout.write(f"RESULT weight_server {line}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
