"""``python -m executor.worker serve {candidate|reference} {gpu|host|none}``: one worker process."""

import sys

from executor.worker.process import main

sys.exit(main(sys.argv[1:]))
