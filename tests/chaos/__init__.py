"""`make chaos`: the standard fault scenarios against the real stack, each measured (``python -m tests.chaos``)."""
