"""Entry point: ``python -m trnlens.agent`` in place, ``python -I trnlens-agent.pyz`` shipped."""

from .main import main

raise SystemExit(main())
