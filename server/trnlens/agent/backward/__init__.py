"""Backward at its forward: each op the autograd engine runs, put on the forward op that made
its node (the op's frame, project line and nn.Module), read from the profiler's own events.

``links.py`` pairs a backward node with its forward op by the profiler's sequence numbers;
``modulemap.py`` names the module that owns a parameter or made an autograd node (also what the
collectives pass reads to put a bucket's all-reduce on its modules).
"""
