"""STAND-IN for torch_xla, which the older torch-neuronx depends on."""
