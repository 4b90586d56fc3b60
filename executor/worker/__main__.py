"""``python -m executor.worker serve {candidate|reference} {gpu|host|none}``: one worker process."""

import os
import sys

# No pydantic plugin is loaded into a worker (nor its runner): without this, its first model reads the
# entry points of every installed distribution to look for one (~8-14 ms of each worker's start).
os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"

if sys.argv[1:3] == ["runner", "probe"]:  # can a runner confine itself here? (runner_confinement)
    from executor.worker.runner import probe

    sys.exit(probe())
if sys.argv[1:2] == ["runner"]:  # a function candidate's own process: imports no checker
    from executor.worker.runner import serve

    sys.exit(serve(sys.argv[3] if len(sys.argv) > 3 else "host"))

from executor.worker.process import main

sys.exit(main(sys.argv[1:]))
