from trnlens.cli import main

raise SystemExit(main())
