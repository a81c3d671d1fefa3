"""``python -m services.worker``: see :mod:`services.worker.cli`."""

from services.worker.cli import main

raise SystemExit(main())
