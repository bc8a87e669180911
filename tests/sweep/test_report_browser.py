"""The HTML report in a real browser: headless Chromium loads ``placement report``'s page
offline, with no console error, every figure image loaded with a non-zero size, and
saves a screenshot of the whole page (``report.png`` beside it; the test prints where).

Chromium (Debian package ``chromium``, installed by ``.ci/run`` when missing) is driven
through its DevTools protocol with a small client over ``websocket-client``. The page is
opened with the network emulated offline and every request it makes is recorded: each
must be the page itself or a ``data:`` image (no external script, style or font).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
CIM_SWEEP = ("sweep", ROOT / "examples" / "resnet_tiny_int8.onnx", "--profile",
             GOLDEN / "resnet_tiny_int8.profile.json", "--hardware", "arm-a72,arm-a72-model",
             "--crossbars", "8,50", "--t-mvm-ns", "50,100", "--workers", "1", "-q")  # fmt: skip
PIM_SWEEP = ("sweep", ROOT / "examples" / "resnet_tiny.onnx", "--target", "pim", "--profile",
             GOLDEN / "resnet_tiny.nests.json", "--pim-cores", "32,64", "--workers", "1",
             "-q")  # fmt: skip
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0")  # fmt: skip
TIMEOUT = 60.0


class DevTools:
    """A DevTools protocol connection to the browser (one page session on it)."""

    def __init__(self, url: str) -> None:
        import websocket  # websocket-client, a test dependency

        self.ws = websocket.create_connection(url, timeout=TIMEOUT, suppress_origin=True)
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None
        self._id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if self.session is not None:
            message["sessionId"] = self.session
        self.ws.send(json.dumps(message))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self.events.append(json.loads(self.ws.recv()))
        raise TimeoutError(f"no {method} within {TIMEOUT:g} s")

    def of(self, method: str) -> list[dict[str, Any]]:
        return [e.get("params", {}) for e in self.events if e.get("method") == method]


@pytest.fixture
def chromium(tmp_path):
    """A headless Chromium with an empty profile: (DevTools connection to a new page)."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("Chromium is not installed: apt-get install -y chromium (.ci/run does)")
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    proc = subprocess.Popen(
        [exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        url = _devtools_url(proc)
        tools = DevTools(url)
        target = tools.call("Target.createTarget", url="about:blank")["targetId"]
        tools.session = tools.call("Target.attachToTarget", targetId=target,
                                   flatten=True)["sessionId"]  # fmt: skip
        yield tools
        tools.ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _devtools_url(proc: subprocess.Popen) -> str:
    """The browser's DevTools address, from the line Chromium prints when it listens."""
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        found = re.search(r"DevTools listening on (ws://\S+)", line)
        if found:
            return found.group(1)
    raise RuntimeError("Chromium did not start its DevTools server:\n" + "".join(seen[-20:]))


def render(tools: DevTools, page: Path, screenshot: Path) -> list[dict[str, Any]]:
    """Open ``page`` offline, wait for it to load, save a full-page screenshot; the
    page's images as the browser sees them."""
    for domain in ("Page", "Runtime", "Log", "Network"):
        tools.call(f"{domain}.enable")
    tools.call("Network.emulateNetworkConditions", offline=True, latency=0,
               downloadThroughput=-1, uploadThroughput=-1)  # fmt: skip
    tools.call("Page.navigate", url=page.resolve().as_uri())
    tools.wait_for("Page.loadEventFired")
    images = tools.call(
        "Runtime.evaluate", returnByValue=True, awaitPromise=True,
        expression="Promise.all(Array.from(document.images, i => i.decode().then(() => 'ok',"
        " e => String(e)).then(decoded => ({file: i.dataset.file, decoded, complete:"
        " i.complete, natural: [i.naturalWidth, i.naturalHeight], shown:"
        " [i.getBoundingClientRect().width, i.getBoundingClientRect().height]}))))",
    )["result"]["value"]  # fmt: skip
    height = tools.call("Page.getLayoutMetrics")["cssContentSize"]["height"]
    tools.call("Emulation.setDeviceMetricsOverride", width=1280, height=int(height) + 1,
               deviceScaleFactor=1, mobile=False)  # fmt: skip
    data = tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    import base64

    screenshot.write_bytes(base64.b64decode(data["data"]))
    return images


@pytest.mark.slow
@pytest.mark.parametrize("target", ["cim", "pim"])
def test_report_page_renders_in_chromium_offline(capsys, tmp_path, chromium, target):
    sweep = tmp_path / "sweep"
    code, _, err = run(capsys, *(CIM_SWEEP if target == "cim" else PIM_SWEEP), "-o", sweep)
    assert code == 0, err
    code, _, err = run(capsys, "report", sweep, "-q")
    assert code == 0, err
    page = sweep / "report.html"
    html = page.read_text(encoding="utf-8")
    # self-contained: no script, style sheet or font from anywhere
    assert not re.search(r"<script|<link|@import|@font-face|url\(", html, re.IGNORECASE)

    shot = sweep / "report.png"
    images = render(chromium, page, shot)
    print(f"screenshot of the {target} report: {shot}")

    pngs = sorted((sweep / "figures").glob("*.png"))
    assert len(pngs) >= (3 if target == "cim" else 2)  # the figures the data allows (one
    # network: no per-network figure)
    assert sorted(Path(i["file"]).name for i in images) == [p.name for p in pngs]
    for image in images:
        assert image["decoded"] == "ok" and image["complete"], image
        assert min(image["natural"]) > 0 and min(image["shown"]) > 0, image
    errors = (
        [e["exceptionDetails"].get("text") for e in chromium.of("Runtime.exceptionThrown")]
        + [e["args"] for e in chromium.of("Runtime.consoleAPICalled") if e["type"] == "error"]
        + [e["entry"]["text"] for e in chromium.of("Log.entryAdded")
           if e["entry"]["level"] == "error"]
        + [e.get("errorText") for e in chromium.of("Network.loadingFailed")]
    )  # fmt: skip
    assert not errors, errors
    requested = [e["request"]["url"] for e in chromium.of("Network.requestWillBeSent")]
    assert requested and all(u == page.resolve().as_uri() or u.startswith("data:image/png")
                             for u in requested), requested  # fmt: skip
    from matplotlib.image import imread

    # the page fits the window: wide tables scroll in their box instead of widening it
    assert 1200 <= imread(shot).shape[1] <= 1280 and shot.stat().st_size > 10_000
