"""The trnlens agent: runs on the target, next to torch.

It stands alone: stdlib + torch (+ torch_neuronx when present), and imports nothing from the rest
of trnlens, because it is shipped (as a zipapp, see ``trnlens.targets.bundle``) to hosts where
trnlens is not installed. Modules here import torch lazily, inside functions, so that the pure
parts (``protocol``, ``sources``) can also be read by the language server without loading torch.
"""
