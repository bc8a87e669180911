"""Where solves run (placement/solvers/workers.py): worker processes that die with their
parent; connecting to a Dask scheduler, the address checked before connecting, one line
on failure and nothing printed afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from placement.errors import PlacementError
from placement.solvers.workers import WATCH_SECONDS, check_scheduler_address


@pytest.mark.unit
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("tcp://scheduler:8786", "tcp://scheduler:8786"),
        ("scheduler:8786", "tcp://scheduler:8786"),  # Dask's default scheme
        ("TCP://10.0.0.7:1", "tcp://10.0.0.7:1"),
        (" ws://h.example.org:8787 ", "ws://h.example.org:8787"),
        ("tcp://[::1]:8786", "tcp://[::1]:8786"),
    ],
)
def test_a_scheduler_address_is_normalised_the_way_dask_reads_it(given, expected):
    from distributed.comm.addressing import parse_address, parse_host_port

    address = check_scheduler_address(given)
    assert address == expected
    scheme, location = parse_address(address)  # Dask's own parser agrees on every part
    host, port = parse_host_port(location)
    assert f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}" == expected


@pytest.mark.unit
@pytest.mark.parametrize(
    ("given", "fragment"),
    [
        ("not a url", "is not a scheduler address"),
        ("", "is not a scheduler address"),
        ("tcp://host:8786\n", "tcp://host:8786"),  # stripped: the newline is no part of it
        ("127.0.0.1", "has no port"),
        ("tcp://h", "has no port"),
        ("foo://h:1", "unknown scheme 'foo'"),
        ("inproc://h:1", "unknown scheme 'inproc'"),
        ("tcp://h:99999", "the port must be 1 to 65535"),
        ("tcp://h:0", "the port must be 1 to 65535"),
        ("tcp://h:8786/path", "is not host:port"),
        ("tcp://user@h:8786", "is not host:port"),
        ("tcp://:8786", "is not host:port"),
        ("tls://h:8786", "tls:// needs the client's TLS certificates"),
    ],
)
def test_a_bad_scheduler_address_is_one_line(given, fragment):
    if given.endswith("\n"):  # surrounding blanks are dropped, as a shell user expects
        assert check_scheduler_address(given) == fragment
        return
    with pytest.raises(PlacementError) as info:
        check_scheduler_address(given)
    assert fragment in str(info.value) and "\n" not in str(info.value)


# Client(...) raising after it started its event loop used to leave a half-made client
# whose __del__ printed "Exception ignored in: <function Client.__del__>" ~2 x timeout
# later. Widening the schemes lets an address through that Dask itself cannot parse.
HALF_MADE = textwrap.dedent(
    """
    import sys
    from placement.errors import PlacementError
    from placement.solvers import workers
    workers.SCHEDULER_SCHEMES = workers.SCHEDULER_SCHEMES + ("inproc",)
    try:
        workers.connect("inproc://h:1", timeout=1.0)
    except PlacementError as exc:
        print(exc, file=sys.stderr)
    """
)


@pytest.mark.integration
def test_a_client_that_fails_half_way_is_closed_and_prints_nothing_later():
    run = subprocess.run([sys.executable, "-c", HALF_MADE], capture_output=True, text=True,
                         timeout=120, check=False)  # fmt: skip
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 0 and len(lines) == 1, run.stderr
    assert lines[0].startswith("cannot connect to the Dask scheduler at inproc://h:1 within 1 s")


# A process with two pool workers that sleep, and the CP-SAT worker started: it prints
# their pids, then waits to be killed.
KEPT_BUSY = textwrap.dedent(
    """
    import sys, time
    from placement.solvers import cpsat, workers

    with workers.process_pool(2) as pool:
        futures = [pool.submit(time.sleep, 120) for _ in range(2)]
        while len(pool._processes) < 2:
            time.sleep(0.01)
        pids = list(pool._processes) + [cpsat._worker().process.pid]
        print(*pids, flush=True)
        time.sleep(120)
    """
)


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "State:\tZ" in status  # a zombie that nobody reaped


@pytest.mark.integration
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_die_with_a_parent_killed_by_sigkill():
    proc = subprocess.Popen([sys.executable, "-c", KEPT_BUSY], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 3 and not any(_gone(p) for p in pids)
    finally:
        proc.kill()
        proc.wait()
    # A worker still starting (a spawned interpreter importing the package: seconds on a
    # loaded machine) checks its parent when its start ends; a running one within
    # WATCH_SECONDS. The bound is for the slowest start, not a measure of either.
    end = time.monotonic() + 10 * WATCH_SECONDS + 60
    while time.monotonic() < end and not all(_gone(p) for p in pids):
        time.sleep(0.05)
    left = [p for p in pids if not _gone(p)]
    for p in left:  # do not leave them to the rest of the test run
        os.kill(p, signal.SIGKILL)
    assert not left, left


# One worker kept busy, the other idle (waiting for a task): Ctrl-C reaches both.
INTERRUPTED = textwrap.dedent(
    """
    import sys, time
    from placement.solvers import workers

    try:
        with workers.process_pool(2) as pool:
            busy, quick = pool.submit(time.sleep, 300), pool.submit(time.sleep, 0)
            quick.result()
            print("ready", flush=True)
            busy.result()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
    """
)


@pytest.mark.integration
def test_ctrl_c_ends_the_workers_without_a_word_from_them():
    """SIGINT to the process group, as a terminal's Ctrl-C: the workers ignore it (an idle
    one would print a traceback), and the parent ends them rather than wait for the busy
    one's task (300 s; the test would time out)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # the quick worker back to waiting for a task
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0 and err == "interrupted\n", err
