"""Tests of cube/diagnose/."""
