"""``python -m tests.mutation``: see :mod:`tests.mutation.runner`."""

from tests.mutation.runner import main

raise SystemExit(main())
