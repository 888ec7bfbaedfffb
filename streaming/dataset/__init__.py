"""Reading datasets: local random access, world/partition/shuffle/sampling/batching, caching and resumption."""
