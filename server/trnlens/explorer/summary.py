"""The device profile summary Neuron Explorer computes: total time, MFU/HFU/MBU, DMA size, advice.

``neuron-explorer view -n F.neff -s P.ntff`` writes the summary two documented ways
(docs/neuron.md): its default parquet output has a ``Summary`` table, and
``--output-format summary-json`` writes ``{"summary": [{metric: value, ...}, ...]}`` (one entry
per profiled NeuronCore), a schema the docs say may change. Both are read here, feature-detected:

- parquet needs ``pyarrow``, which trnlens does not depend on (it is large, and the server stays
  light); without it a parquet summary is reported unreadable with what to do instead;
- summary-json is pinned to the layout above (``SUMMARY_JSON_MAJOR``): a document that says it
  is a newer major version is still read for the metrics it names alike, with a warning;
  anything else is unreadable, and says why.

The figures go into the result as ``device_summary`` (schema version 2). The recommendations are
Explorer's own, with the thresholds its docs give: model FLOPs under 50% of the hardware's,
transposes over 10% of the FLOPs, spill reloads over 25% of HBM reads. The average DMA size is
reported as a figure only (no threshold is documented for it). Nothing here imports torch.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from trnlens.explorer import artifacts

SUMMARY_JSON_MAJOR = 1  # the summary-json layout this reader is written against
SUMMARY_JSON_NAME = "explorer-summary.json"
EXPLORER_PATHS = ("/opt/aws/neuron/bin/neuron-explorer",)
# metric name in Explorer's summary -> our field
METRICS = {
    "total_time": "total_time_s",
    "mfu_estimated_percent": "mfu_percent",
    "hfu_estimated_percent": "hfu_percent",
    "mbu_estimated_percent": "mbu_percent",
    "average_dma_size": "average_dma_size_bytes",
    "mm_arithmetic_intensity": "mm_arithmetic_intensity",
    "useful_read_percent": "useful_read_percent",
    "model_flops": "model_flops",
    "hardware_flops": "hardware_flops",
    "transpose_flops": "transpose_flops",
    # Not in the metric list docs/neuron.md quotes (unconfirmed names): read when present, for the
    # spill-reload recommendation.
    "spill_reload_bytes": "spill_reload_bytes",
    "hbm_read_bytes": "hbm_read_bytes",
}
MODEL_TO_HARDWARE_FLOPS_MIN = 0.50
TRANSPOSE_FLOPS_MAX = 0.10
SPILL_RELOAD_MAX = 0.25


class Unreadable(Exception):
    """The file is not a summary this reader can use; the message says why and what to do."""


def read(path: Path) -> dict:
    """The summary in ``path`` (summary-json or parquet) as a ``device_summary`` dict."""
    if path.suffix == ".parquet":
        rows, version = _parquet_rows(path), None
        warnings: list[str] = []
        source = "parquet"
    else:
        rows, version, warnings = _json_rows(path)
        source = "summary-json"
    metrics = _combine(rows)
    if not any(key in metrics for key in ("total_time_s", "mfu_percent", "mbu_percent")):
        raise Unreadable(f"{path.name}: the summary names none of total_time, mfu/mbu_estimated")
    return {
        "source": source,
        "file": path.name,
        "format_version": version,
        "cores": len(rows),
        **metrics,
        "recommendations": recommendations(metrics),
        "warnings": warnings,
    }


def _json_rows(path: Path) -> tuple[list[dict], str | None, list[str]]:
    try:
        document = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise Unreadable(f"{path.name} is not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise Unreadable(f"{path.name}: a summary-json document is an object")
    warnings = []
    version = document.get("version", document.get("schema_version"))
    if version is not None:
        major = _major(version)
        if major is None:
            raise Unreadable(f"{path.name}: unknown summary-json version {version!r}")
        if major > SUMMARY_JSON_MAJOR:
            warnings.append(
                f"{path.name} is summary-json version {version}, newer than the version "
                f"{SUMMARY_JSON_MAJOR} this trnlens reads: the metrics it names alike are "
                "shown, others may be missing (upgrade trnlens)"
            )
    rows = document.get("summary")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows) or not rows:
        raise Unreadable(
            f"{path.name} has no 'summary' list: not neuron-explorer's summary-json output "
            "(write it with --output-format summary-json)"
        )
    return rows, None if version is None else str(version), warnings


def _parquet_rows(path: Path) -> list[dict]:
    try:
        import pyarrow.parquet as pq  # optional: feature-detected, never a dependency
    except ImportError:
        raise Unreadable(
            f"{path.name} is parquet and pyarrow is not installed here: pip install pyarrow, "
            "or have neuron-explorer write --output-format summary-json"
        ) from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises its own error types
        raise Unreadable(f"{path.name}: pyarrow cannot read it ({exc})") from None
    rows = table.to_pylist()
    names = set(table.column_names)
    if {"metric", "value"} <= names:  # long layout: one row per metric
        combined: dict = {}
        for row in rows:
            combined[str(row["metric"])] = row["value"]
        return [combined]
    return rows


def _major(version) -> int | None:
    try:
        return int(str(version).split(".")[0])
    except ValueError:
        return None


def _combine(rows: list[dict]) -> dict:
    """One figure per metric over the NeuronCores: the longest time, the mean of the rest."""
    metrics: dict = {}
    for name, key in METRICS.items():
        values = [r[name] for r in rows if isinstance(r.get(name), (int, float))]
        if not values:
            continue
        if key == "total_time_s":
            metrics[key] = max(values)
        elif key.endswith("flops") or key.endswith("bytes") and key != "average_dma_size_bytes":
            metrics[key] = sum(values)
        else:
            metrics[key] = sum(values) / len(values)
    return metrics


def recommendations(m: dict) -> list[dict]:
    found = []
    hardware = m.get("hardware_flops")
    if hardware and m.get("model_flops") is not None:
        ratio = m["model_flops"] / hardware
        if ratio < MODEL_TO_HARDWARE_FLOPS_MIN:
            found.append(
                {
                    "id": "model-flops-ratio",
                    "message": f"the model's FLOPs are {100 * ratio:.0f}% of the FLOPs the "
                    "hardware ran (under 50%): recomputation, padding or transposes add work",
                }
            )
    if hardware and m.get("transpose_flops") is not None:
        share = m["transpose_flops"] / hardware
        if share > TRANSPOSE_FLOPS_MAX:
            found.append(
                {
                    "id": "transposes",
                    "message": f"transposes are {100 * share:.0f}% of the FLOPs (over 10%): "
                    "choose layouts that need no transpose",
                }
            )
    if m.get("hbm_read_bytes") and m.get("spill_reload_bytes") is not None:
        share = m["spill_reload_bytes"] / m["hbm_read_bytes"]
        if share > SPILL_RELOAD_MAX:
            found.append(
                {
                    "id": "spill-reload",
                    "message": f"spill reloads are {100 * share:.0f}% of HBM reads (over 25%): "
                    "the working set does not fit on-chip memory; smaller tiles or fewer live "
                    "tensors",
                }
            )
    return found


def find(run_dir: Path) -> Path | None:
    """A summary already in the run's folder: ours, else any summary-json or parquet Summary."""
    ours = run_dir / SUMMARY_JSON_NAME
    if ours.is_file():
        return ours
    for pattern in ("*summary*.json", "*Summary*.parquet", "*summary*.parquet"):
        hits = sorted(p for p in run_dir.rglob(pattern) if p.is_file() and not p.is_symlink())
        if hits:
            return hits[0]
    return None


def explorer_binary() -> str | None:
    found = shutil.which("neuron-explorer")
    if found:
        return found
    return next((p for p in EXPLORER_PATHS if Path(p).is_file()), None)


def generate(run_dir: Path, neff: Path, ntff: Path, binary: str, timeout_s: float = 120) -> Path:
    """Has neuron-explorer write the summary-json of one NEFF/NTFF pair into the run's folder."""
    out = run_dir / SUMMARY_JSON_NAME
    command = [binary, "view", "-n", str(neff), "-s", str(ntff),
               "--output-format", "summary-json", "--output-file", str(out)]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unreadable(f"neuron-explorer could not summarise the profile ({exc})") from None
    if done.returncode != 0 or not out.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise Unreadable(f"neuron-explorer could not summarise the profile: {tail[0]}")
    return out


def attach(result: dict, run_dir: Path, binary: str | None = None) -> None:
    """Adds ``device_summary`` to a Neuron result (or a warning saying why there is none)."""
    if result.get("backend") != "neuron" or result.get("error"):
        return
    try:
        path = find(run_dir)
        if path is None:
            binary = binary or explorer_binary()
            pairs = [
                (p.neff.path, n.path)
                for p in artifacts.find(run_dir).pairs
                for n in p.ntffs
                if not n.empty
            ]
            if binary is None or not pairs:
                why = (
                    "neuron-explorer is not installed here"
                    if binary is None
                    else ("the run has no NEFF with a non-empty NTFF")
                )
                result["warnings"].append(f"no device profile summary: {why}")
                return
            path = generate(run_dir, *pairs[0], binary)
        result["device_summary"] = read(path)
        result["warnings"].extend(result["device_summary"]["warnings"])
    except Unreadable as exc:
        result["warnings"].append(f"device profile summary unreadable: {exc}")
