"""STAND-IN for the public index's torch-neuronx placeholder: its import raises."""

raise Exception(
    "WRONG PACKAGE: this is a placeholder; install torch-neuronx from the AWS Neuron repository"
)
