"""torchrun, as the job runner starts it: ``python app/jobs/launcher.py <torchrun options>``.

Before torchrun loads, this (1) asks the kernel to SIGKILL it when the server dies
(PR_SET_PDEATHSIG — the server's runner thread that started it lives as long as the server),
(2) checks that the server (``SHARDSCOPE_SERVER_PID``) is still its parent, in case the server
died before (1), and (3) writes its own pid as ``SHARDSCOPE_LAUNCHER_PID`` for its ranks, whose
guard (workers/common.py) does the same against it before they import torch. So a job dies with
its server, and a rank with its launcher, whichever dies and whenever. Nothing else is imported
here: the guard is in place within milliseconds of the fork.
"""

import os
import runpy
import sys

del sys.path[0]  # app/jobs/: none of its modules is torchrun's

try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
except (OSError, AttributeError):
    pass
server = os.environ.get("SHARDSCOPE_SERVER_PID")
if server and os.getppid() != int(server):
    os._exit(3)
os.environ["SHARDSCOPE_LAUNCHER_PID"] = str(os.getpid())
sys.argv = ["torchrun", *sys.argv[1:]]
runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
