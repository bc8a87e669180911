"""Connecting to a Dask scheduler: the address checked before connecting, one line on
failure and nothing printed afterwards (placement/sweep/executors.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from placement.errors import PlacementError
from placement.sweep.executors import check_scheduler_address


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
    from placement.sweep import executors
    executors.SCHEDULER_SCHEMES = executors.SCHEDULER_SCHEMES + ("inproc",)
    try:
        executors.connect("inproc://h:1", timeout=1.0)
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
