import sys

from .interpreter import require_dependencies

require_dependencies()

from .cli import main  # noqa: E402  (after the check: cli imports the dependencies)

sys.exit(main())
