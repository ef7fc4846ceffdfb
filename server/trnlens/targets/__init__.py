"""Where a profile runs and how the agent is started there (local subprocess; SSH later)."""
