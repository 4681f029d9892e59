"""Tests of cube/config/."""
