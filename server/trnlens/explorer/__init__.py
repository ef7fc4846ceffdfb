"""Neuron Explorer from the editor: a run's NEFF/NTFF artifacts, the host's explorer, the tunnel."""
