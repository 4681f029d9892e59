"""The repository as a whole: the import layers, the wheel, the Makefile's install."""
