"""Parts of bench/scale.py: CPU cgroups, the cheap watched endpoint, the analysis of its records."""
