"""Tests of cube/llm/."""
