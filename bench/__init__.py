"""Chronolog benchmarks: ``make bench`` runs every ``bench/bench_*.py`` module."""
