"""A small training project in the layout of real ones: a process-group manager (``groups``),
a trainer and a checkpoint helper that call torch.distributed directly, and an entry point.
tests/test_port_fixtures.py ports ``groups`` alone and runs the project before and after."""
