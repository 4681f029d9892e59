"""Tests of cube/cli/ (the `cube` command)."""
