"""A run's artifacts directory as a tar.gz, sent after its result; the run directory removed.

Only ``<run_dir>/artifacts`` of the request that just ran is ever archived or removed: the
request names the run directory it staged (``artifacts_back``) and the agent checks it against
the request's own ``artifacts_dir``.
"""

from __future__ import annotations

import base64
import io
import os
import shutil
import tarfile

from ..protocol import ARTIFACTS_MAX_BYTES


def answer(run_dir: str, last_artifacts_dir: object) -> tuple[str | None, str | None]:
    """(base64 tar.gz, None) with the run directory removed, or (None, why not) with it left
    for the target to fetch its own way."""
    if not isinstance(last_artifacts_dir, str) or (
        os.path.join(run_dir, "artifacts") != last_artifacts_dir
    ):
        return None, "not the last run's directory"
    raw = io.BytesIO()
    try:
        with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=1) as archive:
            # Fast level: these bytes go over one pipe at once, a trace compresses well anyway.
            for name in sorted(os.listdir(last_artifacts_dir)):
                archive.add(os.path.join(last_artifacts_dir, name), arcname=name)
    except (OSError, tarfile.TarError, ValueError) as exc:
        return None, f"cannot archive the artifacts: {exc}"
    if raw.tell() > ARTIFACTS_MAX_BYTES:
        return None, f"the artifacts are over {ARTIFACTS_MAX_BYTES} bytes compressed"
    shutil.rmtree(run_dir, ignore_errors=True)
    return base64.b64encode(raw.getvalue()).decode("ascii"), None
