"""icn-bench-report: runs nccl-tests (stock and ICN's patched tests) under several NCCL/ICN
configurations and turns the results into a Markdown report with PNG plots and one JSON file."""
VERSION = 1
