"""`hpc-train bench`: each benchmark compares hpc-train with its baseline side by side and writes BENCHMARKS.md."""
