"""Exit codes shared by every subcommand (documented in README.md, one table)."""

OK = 0
FINDINGS = 1  # findings or a regression, for the commands that look for them
USAGE = 2
USER_CODE_FAILED = 3  # the profiled code raised; its traceback is mapped to file:line
TARGET_UNUSABLE = 4  # the target or its environment cannot run a profile
