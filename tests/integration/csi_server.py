"""A `rosetctl serve` process driven over its unix socket with generated gRPC stubs."""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import grpc
import pytest

READY_DEADLINE = 15.0
CALL_TIMEOUT = 30.0


class Server:
    """One `rosetctl serve` process, its log file and stubs on a channel to its socket."""

    def __init__(self, csi, cli, socket_path: Path, log_path: Path, extra=()):
        self.csi, self.socket_path, self.log_path = csi, socket_path, log_path
        self._log = open(log_path, "wb")
        self.proc = cli.start("serve", "--endpoint", f"unix://{socket_path}", "-v", "--grace-period", "5",
                              *extra, stdout=subprocess.DEVNULL, stderr=self._log)
        self.channel = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> "Server":
        deadline = time.monotonic() + READY_DEADLINE
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"expected serve to keep running; it exited {self.proc.returncode}: {self.log()}")
            if self.socket_path.is_socket():
                self.channel = grpc.insecure_channel(f"unix://{self.socket_path}")
                try:
                    grpc.channel_ready_future(self.channel).result(timeout=max(0.1, deadline - time.monotonic()))
                    return self
                except grpc.FutureTimeoutError:
                    break
            time.sleep(0.05)
        raise AssertionError(f"expected serve to listen on {self.socket_path} within {READY_DEADLINE}s: {self.log()}")

    @property
    def identity(self):
        return self.csi.grpc.IdentityStub(self.channel)

    @property
    def controller(self):
        return self.csi.grpc.ControllerStub(self.channel)

    @property
    def node(self):
        return self.csi.grpc.NodeStub(self.channel)

    def stop(self, sig=signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=timeout)
        self._log.close()
        return rc

    def close(self):
        if self.channel is not None:
            self.channel.close()
        if not self._log.closed:
            self._log.close()


def refused_second_serve(csi, cli, socket_path: Path, log_path: Path, extra=()) -> tuple[int | None, str]:
    """A second `serve` (its own state in CLI) started with EXTRA: its exit code (None if it was still
    running after READY_DEADLINE: not refused) and its log. It is stopped either way."""
    second = Server(csi, cli, socket_path, log_path, extra)
    try:
        rc = second.proc.wait(timeout=READY_DEADLINE)
    except subprocess.TimeoutExpired:
        rc = None
    finally:
        second.close()
    return rc, second.log()


def mount_capability(pb2):
    access = pb2.VolumeCapability.AccessMode(mode=pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER)
    return pb2.VolumeCapability(mount=pb2.VolumeCapability.MountVolume(), access_mode=access)


def expect_code(call, code: grpc.StatusCode, what: str) -> str:
    with pytest.raises(grpc.RpcError) as failure:
        call()
    assert failure.value.code() == code, (
        f"expected {what} to fail with {code.name}, got {failure.value.code().name}: {failure.value.details()}")
    return failure.value.details()
