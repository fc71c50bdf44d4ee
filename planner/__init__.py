"""Parallel-layout planner."""
