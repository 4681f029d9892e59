"""Tests of cube/cli.py."""
