"""A contrastive loss in the style of open_clip (src/open_clip/loss.py): ``gather_features``
either through the differentiable ``torch.distributed.nn.functional.all_gather`` (a tuple of
every rank's tensor) or through ``dist.all_gather`` into a list, where the local chunk is put
back so that it keeps its gradient."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.nn.functional
import torch.nn.functional as F


def gather_features(
    image_features: torch.Tensor,
    text_features: torch.Tensor,
    local_loss: bool = False,
    gather_with_grad: bool = False,
    rank: int = 0,
    world_size: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    if gather_with_grad:
        all_image_features = torch.cat(
            torch.distributed.nn.functional.all_gather(image_features), dim=0
        )
        all_text_features = torch.cat(
            torch.distributed.nn.functional.all_gather(text_features), dim=0
        )
    else:
        gathered_image_features = [torch.zeros_like(image_features) for _ in range(world_size)]
        gathered_text_features = [torch.zeros_like(text_features) for _ in range(world_size)]
        dist.all_gather(gathered_image_features, image_features)
        dist.all_gather(gathered_text_features, text_features)
        if not local_loss:
            # ensure grads for local rank when all_* features don't have a gradient
            gathered_image_features[rank] = image_features
            gathered_text_features[rank] = text_features
        all_image_features = torch.cat(gathered_image_features, dim=0)
        all_text_features = torch.cat(gathered_text_features, dim=0)
    return all_image_features, all_text_features


class ClipLoss:
    def __init__(
        self,
        local_loss: bool = False,
        gather_with_grad: bool = False,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.local_loss = local_loss
        self.gather_with_grad = gather_with_grad
        self.rank = rank
        self.world_size = world_size

    def get_ground_truth(self, num_logits: int) -> torch.Tensor:
        labels = torch.arange(num_logits, dtype=torch.long)
        if self.world_size > 1 and self.local_loss:
            labels = labels + num_logits * self.rank
        return labels

    def get_logits(
        self, image_features: torch.Tensor, text_features: torch.Tensor, logit_scale: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.world_size > 1:
            all_image_features, all_text_features = gather_features(
                image_features,
                text_features,
                self.local_loss,
                self.gather_with_grad,
                self.rank,
                self.world_size,
            )
            if self.local_loss:
                logits_per_image = logit_scale * image_features @ all_text_features.T
                logits_per_text = logit_scale * text_features @ all_image_features.T
            else:
                logits_per_image = logit_scale * all_image_features @ all_text_features.T
                logits_per_text = logits_per_image.T
        else:
            logits_per_image = logit_scale * image_features @ text_features.T
            logits_per_text = logit_scale * text_features @ image_features.T
        return logits_per_image, logits_per_text

    def __call__(
        self, image_features: torch.Tensor, text_features: torch.Tensor, logit_scale: float
    ) -> torch.Tensor:
        logits_per_image, logits_per_text = self.get_logits(
            image_features, text_features, logit_scale
        )
        labels = self.get_ground_truth(logits_per_image.shape[0])
        return (
            F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)
        ) / 2


def run() -> dict[str, Any]:
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    results: dict[str, Any] = {}
    # what the differentiable all_gather returns: a tuple with every rank's tensor
    features = torch.tensor([[1.0 + rank, 2.0], [0.5, -float(rank)]])
    gathered = torch.distributed.nn.functional.all_gather(features)
    results["all_gather"] = gathered
    results["all_gather len, own"] = [len(gathered), gathered[rank]]
    results["all_gather stacked"] = torch.stack(gathered)
    for local_loss in (False, True):
        for gather_with_grad in (False, True):
            base = torch.arange(6, dtype=torch.float32).reshape(3, 2)
            image = F.normalize(base * 0.3 + rank, dim=-1).requires_grad_()
            text = F.normalize(base.flip(0) * 0.2 - rank, dim=-1).requires_grad_()
            loss_fn = ClipLoss(local_loss, gather_with_grad, rank, world_size)
            loss = loss_fn(image, text, logit_scale=2.0)
            loss.backward()
            name = f"local_loss={local_loss} gather_with_grad={gather_with_grad}"
            results[name] = {"loss": loss, "image.grad": image.grad, "text.grad": text.grad}
    return results
