"""Whole runs: the notebooks under papermill, Jupyter and nbconvert, end to end."""
