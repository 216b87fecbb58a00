"""Distributed training code written in the styles of real codebases (open_clip, Megatron-LM,
DeepSpeed, detectron2, fairseq, Lightning, timm, torchvision), for tests/test_port_fixtures.py:
each module is ported with ``compat port`` and run, original and ported, on real ranks.

The code is this project's own, written in those projects' patterns. ``tensors`` (tensor helpers
for the framework-neutral modules), ``driver`` (runs a job's modules and prints their results)
and ``parallel_state`` (a helper the ported code calls but that is never ported) are not ported.
"""
