"""Benchmarks: they print figures and ratios and assert nothing about speed (`make bench`).

``python -m tests.bench`` measures mention → reply latency, as a real Matrix client sees it, on one
Synapse: first against a bare echo appservice (``echo_as``, the floor), then against summon itself.
"""
