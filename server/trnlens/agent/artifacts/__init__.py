"""A remote run's artifacts, sent back on the agent's own connection right after its result
(issue 32): no round trip and no new ssh command (a process on each side, a shell, tar, gzip)."""
