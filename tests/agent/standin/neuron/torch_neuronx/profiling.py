"""STAND-IN for torch_neuronx.profiling (documented API, NEURON.md); logs what it is given."""

import enum
import os
import time

from torch._C._profiler import _ExperimentalConfig

from torch_neuronx import log


class ProfileMode(enum.Enum):
    DEVICE = "DEVICE"
    RUNTIME = "RUNTIME"
    CPU_UTIL = "CPU_UTIL"
    HOST_MEMORY = "HOST_MEMORY"


class NeuronConfig(_ExperimentalConfig):
    def __init__(
        self,
        modes=None,
        max_events_per_nc=None,
        capture_enabled_for_nc=None,
        profile_output_dir=None,
        neff_cache_dir=None,
        precache_node_info=True,
        **extra,
    ):
        if extra and os.environ.get("TRNLENS_STANDIN_NO_CORRELATE"):
            raise TypeError(f"NeuronConfig() got unexpected keyword arguments {sorted(extra)}")
        super().__init__()
        self.modes = list(modes or [ProfileMode.DEVICE, ProfileMode.RUNTIME])
        self.profile_output_dir = profile_output_dir
        fields = {"modes": [m.value for m in self.modes], "profile_output_dir": profile_output_dir}
        fields.update(extra)
        if neff_cache_dir:
            fields["neff_cache_dir"] = neff_cache_dir
        log("NeuronConfig", **fields)


class NeuronProfiler:
    def __init__(self, config):
        assert isinstance(config, NeuronConfig)
        self.config = config
        log("NeuronProfiler", config="NeuronConfig")

    def export_trace(self, prof):
        log("NeuronProfiler.export_trace", profiler=type(prof).__name__)
        # The documented layout: <dir>/<instance-id>_pid_<pid>/<timestamp>/...
        run = os.path.join(
            self.config.profile_output_dir,
            f"i-0standin_pid_{os.getpid()}",
            time.strftime("%Y%m%d%H%M%S"),
        )
        os.makedirs(run, exist_ok=True)
        for name in (
            "neff_395760075800974.neff",
            "395760075800974_instid_0_vnc_0.ntff",
            "ntrace.pb",
            "trace_info.pb",
        ):
            with open(os.path.join(run, name), "wb") as handle:
                handle.write(b"stand-in")
