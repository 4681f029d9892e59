"""Tests of cube/pages/."""
