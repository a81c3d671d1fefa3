"""`make bench`: the performance figures of the continuity services, each beside a baseline
measured in the same run on the same machine (see docs/performance.md)."""
