"""What a run executed in the project, fingerprinted so that the editor can tell when it changed."""
