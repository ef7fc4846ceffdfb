"""Collectives on every rank: where they were issued, how long, how much waited and exposed.

- ``wrapper``: labels that give a collective its user line (Python calls, ``backward()``);
- ``calls``: one rank's calls read from the profiler's own events (c10d launches, the backend's
  work, FSDP2's labels), with the part no compute hid;
- ``owners``: which modules a call moves (DDP's buckets, FSDP2's sharded modules).
The ranks' calls are matched and their waits found by ``rankmerge`` (docs/ranks.md).
"""
