"""nginx with deploy/nginx.conf in front of a running app, on loopback: its prefix, temp and
cache folders in a temp folder of its own, its ports free ones, stopped by its pid. Used by
tests/api/test_proxy_cache.py and bench/hall.py (a class behind the proxy)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from app.jobs.procs import kill_tree
from bench.servers import wait_until_up

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "deploy" / "nginx.conf"


def nginx_binary() -> str | None:
    return shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def configured(app_port: int, port: int) -> str:
    """deploy/nginx.conf with these ports, and the user of this process: each line that changes
    is there exactly once (so the shipped file and its tests stay in step)."""
    text = CONFIG.read_text()
    user = "user root;" if os.geteuid() == 0 else ""
    for old, new in (("listen 8080;", f"listen 127.0.0.1:{port};"),
                     ("server 127.0.0.1:8000;", f"server 127.0.0.1:{app_port};"),
                     ("user www-data;", user)):
        if text.count(old) != 1:
            raise ValueError(f"deploy/nginx.conf should have {old!r} once")
        text = text.replace(old, new)
    return text


@contextmanager
def nginx(app_port: int):
    """Yield the base URL of nginx in front of the app on ``app_port``."""
    binary = nginx_binary()
    if binary is None:
        raise RuntimeError("nginx is not installed (make setup-test installs it)")
    prefix = Path(tempfile.mkdtemp(prefix="shardscope-nginx-"))
    for folder in ("logs", "temp", "cache"):
        (prefix / folder).mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = prefix / "nginx.conf"
    conf.write_text(configured(app_port, port))
    command = [binary, "-p", f"{prefix}/", "-c", str(conf)]
    check = subprocess.run([*command, "-t"], capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(f"nginx refused deploy/nginx.conf: {check.stderr}")
    proc = subprocess.Popen([*command, "-g", "daemon off;"], start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_until_up(proc, base + "/static/favicon.svg", 20, "nginx", poll_s=0.1)
        except RuntimeError:
            raise RuntimeError((prefix / "logs" / "error.log").read_text()) from None
        yield base
    finally:
        # SIGTERM first: nginx's master stops its workers and exits; killed outright, it would
        # respawn a worker between the children's SIGKILL and its own, and leave it behind
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        kill_tree(proc.pid)
        shutil.rmtree(prefix, ignore_errors=True)
