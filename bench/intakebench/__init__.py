"""The alert-intake benchmark's parts (``bench/intake.py``): the project, the bare baseline, the load."""
