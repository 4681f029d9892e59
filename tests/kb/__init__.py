"""Tests of cube/kb/."""
