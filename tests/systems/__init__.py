"""Tests of cube/systems/."""
