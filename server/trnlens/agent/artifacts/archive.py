"""The answer to ``artifacts``: the last run's artifacts directory as a tar.gz, its run removed.

Only ``<run_dir>/artifacts`` of the request that ran last is ever archived or removed: the
server names the run directory it staged, and the agent checks it against what it wrote.
"""

from __future__ import annotations

import base64
import io
import os
import shutil
import tarfile

from ..protocol import ARTIFACTS_MAX_BYTES


def answer(run_dir: str, last_artifacts_dir: str | None) -> tuple[str | None, str | None]:
    """(base64 tar.gz, None), or (None, why not). The run directory is removed either way once
    it was the last run's (a failure is the server's to fetch otherwise only when it is left)."""
    if not last_artifacts_dir or os.path.join(run_dir, "artifacts") != last_artifacts_dir:
        return None, "not the last run's directory"
    raw = io.BytesIO()
    try:
        with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=1) as archive:
            # Fast level: these bytes go over one pipe at once, a trace compresses well anyway.
            for name in sorted(os.listdir(last_artifacts_dir)):
                archive.add(os.path.join(last_artifacts_dir, name), arcname=name)
    except OSError as exc:
        return None, f"cannot read the artifacts: {exc}"
    if raw.tell() > ARTIFACTS_MAX_BYTES:
        return None, f"the artifacts are over {ARTIFACTS_MAX_BYTES} bytes compressed"
    shutil.rmtree(run_dir, ignore_errors=True)
    return base64.b64encode(raw.getvalue()).decode("ascii"), None
