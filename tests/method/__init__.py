"""Tests of cube/method/."""
