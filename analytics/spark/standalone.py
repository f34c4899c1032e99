"""A Spark standalone cluster on this machine: a master and one worker in their own JVMs, started
with the ``spark-class`` launcher that ships with PySpark. Tests use it to prove that work runs in
executors, and the audit benchmark to run the driver at Spark's default memory while executors
hold the data.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from analytics.spark.session import SMALL_WORK_OPTIONS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class() -> tuple[str, dict]:
    """The ``spark-class`` launcher of the installed PySpark and the environment it needs."""
    import pyspark

    home = Path(pyspark.__file__).parent
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    return str(home / "bin" / "spark-class"), env


def wait_for_worker(master_ui_port: int, logs: list[Path], timeout_s: float = 120) -> None:
    """Return when the master whose web UI is on ``master_ui_port`` (this machine) lists a live worker;
    RuntimeError with the end of ``logs`` when none registered within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            state = json.load(urllib.request.urlopen(f"http://127.0.0.1:{master_ui_port}/json", timeout=2))
            if any(w["state"] == "ALIVE" for w in state.get("workers", [])):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            tails = "\n".join(p.read_text(errors="replace")[-2000:] for p in logs if p.is_file())
            raise RuntimeError(f"the standalone worker did not register:\n{tails}")
        time.sleep(1)


@contextlib.contextmanager
def standalone_cluster(work: Path, cores: int = 2, memory: str = "2g", timeout_s: float = 120) -> Iterator[str]:
    """Start a master and a worker (``cores``, ``memory``), yield the master URL, stop both on exit.

    Logs go to ``work/master.log`` and ``work/worker.log``; executors run under ``work/w``.
    """
    work.mkdir(parents=True, exist_ok=True)
    launcher, env = spark_class()
    # the master and the worker only coordinate: registered in 4.3 s instead of 8.5 s, half the CPU;
    # executors keep the options of the application that asks for them
    env.setdefault("SPARK_DAEMON_JAVA_OPTS", SMALL_WORK_OPTIONS)
    port, ui, worker_ui = free_port(), free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    procs = [
        subprocess.Popen([launcher, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                          "--webui-port", str(ui)], env=env, stdout=open(work / "master.log", "w"),
                         stderr=subprocess.STDOUT, start_new_session=True),
        subprocess.Popen([launcher, "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
                          "--cores", str(cores), "--memory", memory, "--webui-port", str(worker_ui),
                          "--work-dir", str(work / "w")],
                         env=env, stdout=open(work / "worker.log", "w"), stderr=subprocess.STDOUT, start_new_session=True),
    ]
    try:
        wait_for_worker(ui, [work / "worker.log"], timeout_s)
        yield master_url
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)
