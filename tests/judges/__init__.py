"""Tests of cube/judges/."""
