"""Tests of cube/run/."""
