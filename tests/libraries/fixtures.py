"""Hand-written results in the shape the agent's attribution pass writes (``frames``,
``modules``): a tiny Llama's forward, as measured (151 dispatches a step, LlamaRMSNorm 8 a call,
5 calls), pointing at the installed transformers' real modeling_llama.py."""

from __future__ import annotations

import copy
import importlib.metadata
from pathlib import Path

TYPE_PATH = "transformers.models.llama.modeling_llama.LlamaRMSNorm"
NORMS = [
    "model.model.layers.0.input_layernorm",
    "model.model.layers.0.post_attention_layernorm",
    "model.model.layers.1.input_layernorm",
    "model.model.layers.1.post_attention_layernorm",
    "model.model.norm",
]
# LlamaRMSNorm.forward's lines in transformers 4.57.6 and their dispatches a call.
NORM_LINES = {64: 1, 65: 2, 66: 3, 67: 2}
CALLER = {"path": "samples/tiny_llama.py", "line": 34}


def modeling_llama() -> str:
    dist = importlib.metadata.distribution("transformers")
    path = Path(str(dist.locate_file("transformers/models/llama/modeling_llama.py")))
    assert path.is_file(), path
    return str(path)


def llama_result(modeling: str | None = None) -> dict:
    modeling = modeling or modeling_llama()
    library = {"name": "transformers", "version": "4.57.6"}
    frames = [
        {
            "path": modeling,
            "line": line,
            "function": "forward",
            "project": False,
            "library": library,
            "dispatches_per_step": 5.0 * n,
            "self_time_per_step_us": 100.0 * n,
            "callers": [{**CALLER, "dispatches_per_step": 5.0 * n}],
        }
        for line, n in NORM_LINES.items()
    ]
    frames.append(
        {
            "path": "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py",
            "line": 125,
            "function": "forward",
            "project": False,
            "library": {"name": "torch", "version": "2.13.0"},
            "dispatches_per_step": 14.0,
            "self_time_per_step_us": 900.0,
            "callers": [{**CALLER, "dispatches_per_step": 14.0}],
        }
    )
    modules = [
        {
            "name": name,
            "type": kind,
            "type_path": f"transformers.models.llama.modeling_llama.{kind}",
            "source": {"path": modeling, "line": line},
            "calls_per_step": 1.0,
            "dispatches_per_step": dispatches,
            "self_time_per_step_us": self_us,
            "total_time_per_step_us": total_us,
            "caller": CALLER,
        }
        # Named as the agent names them: named_modules' names under the parameter's name.
        for name, kind, line, dispatches, self_us, total_us in (
            ("model", "LlamaForCausalLM", 430, 3.0, 300.0, 3000.0),
            ("model.model", "LlamaModel", 330, 7.0, 200.0, 2700.0),
            ("model.model.layers.0", "LlamaDecoderLayer", 280, 20.0, 200.0, 1200.0),
            ("model.model.layers.1", "LlamaDecoderLayer", 280, 20.0, 200.0, 1200.0),
        )
    ]
    modules += [
        {
            "name": name,
            "type": "LlamaRMSNorm",
            "type_path": TYPE_PATH,
            "source": {"path": modeling, "line": 53},
            "calls_per_step": 1.0,
            "dispatches_per_step": 8.0,
            "self_time_per_step_us": 160.0,
            "total_time_per_step_us": 160.0,
            "caller": CALLER,
        }
        for name in NORMS
    ]
    return {
        "schema_version": 3,
        "run_id": "20260101T000000-abcdef01",
        "created_at": "2026-01-01T00:00:00.000+00:00",
        "function": {"path": "samples/tiny_llama.py", "qualname": "logits", "source_hash": None,
                     "unsaved": False, "line": 33, "end_line": 34},  # fmt: skip
        "variant": {"label": "logits", "kind": "function", "source_hash": None},
        "target": "local", "host": "h", "backend": "cpu", "device": "cpu", "time_basis": "cpu",
        "mode": "inference", "dispatches_per_step": 151, "device_time_per_step_us": 5000.0,
        "cpu_time_per_step_us": 5000.0, "ops": [], "lines": [], "warnings": [], "error": None,
        "versions": {}, "git_commit": None, "inputs": None, "warmup": 3, "steps": 5,
        "wall_time_per_step_us": 5000.0, "peak_memory_bytes": None, "timing": None,
        "artifacts": [],
        "frames": frames,
        "frames_rest": {"count": 20, "dispatches_per_step": 97.0, "self_time_per_step_us": 3300.0},
        "modules": modules,
        "modules_rest": {"count": 0, "dispatches_per_step": 0.0, "self_time_per_step_us": 0.0},
    }  # fmt: skip


def without_frames_inside(result: dict) -> dict:
    """The same run with the norm's lines fallen out of the top frames (into the rest)."""
    out = copy.deepcopy(result)
    out["frames"] = [f for f in out["frames"] if "modeling_llama" not in f["path"]]
    out["frames_rest"]["count"] += len(NORM_LINES)
    return out
