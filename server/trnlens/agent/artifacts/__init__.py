"""A remote run's artifacts, sent back on the agent's own connection (issue 32): one round trip
on the live pipe instead of a new ssh command (a process on each side, a shell, tar, gzip)."""
