r"""Start the demo page (scripts/demo.py), open it in headless Chromium, wait until the first tab has run its
example and the browser shows the heat map, and save a screenshot of the page (how docs/demo.png is made).

    python scripts/benchmarks/demo_screenshot.py --model series=outputs/series-50k/averaged \
        --output_file docs/demo.png

Needs Chromium (Debian: `apt install chromium`) and `pip install -e ".[demo]"`. The browser is driven over
the DevTools protocol on a pipe (`--remote-debugging-pipe`), which needs nothing beyond the standard library:
a one-shot `chromium --screenshot` fires before the page's first result arrives.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# Run from any folder: the demo page's script is in scripts/, this folder's parent.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from demo import SHIPPED_MODELS, DemoModel, resolve_model_specs
from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.errors import MissingPathError
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_output_location, staged

# True once the first tab's heat map is an image the browser has loaded (not the empty placeholder).
HEAT_MAP_SHOWN = (
    "(() => { const img = document.querySelector('#heat-map-0 img');"
    " return !!img && img.complete && img.naturalWidth > 100; })()"
)


class DevTools:
    """The Chrome DevTools protocol over the pipe Chromium opens on file descriptors 3 (in) and 4 (out):
    JSON messages separated by NUL bytes."""

    def __init__(self, browser: str, width: int, height: int):
        to_browser_read, self._write = os.pipe()
        self._read, from_browser_write = os.pipe()
        # Copies numbered above 4, so that moving them onto 3 and 4 in the child cannot overwrite each other.
        browser_in, browser_out = (
            fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_read, from_browser_write)
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        options = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                   f"--window-size={width},{height}", "--hide-scrollbars", "about:blank"]  # fmt: skip
        # Chromium expects the pipe on descriptors 3 and 4 exactly.
        self._process = subprocess.Popen(
            [browser, *options],
            pass_fds=(3, 4),
            preexec_fn=lambda: (os.dup2(browser_in, 3), os.dup2(browser_out, 4)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(browser_in)
        os.close(browser_out)
        self._buffer = b""
        self._next_id = 0

    def call(self, method: str, session: str | None = None, **params) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"Chromium refused {method}: {reply['error']}")
                return reply["result"]

    def _receive(self) -> dict:
        while b"\0" not in self._buffer:
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe (did it start?)")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self) -> None:
        self._process.kill()
        self._process.wait()
        os.close(self._write)
        os.close(self._read)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_port(port: int, server: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"error: the demo exited (code {server.returncode}):\n{server.stdout.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"error: the demo did not listen on port {port} within {timeout:g} s.")


def take_screenshot(
    models: list[str], output: Path, width: int = 1400, height: int = 1100, timeout: float = 300
):
    """Serve `models` (demo.py's `--model` values), load the page, wait for the heat map, save a PNG."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise MissingPathError("No Chromium found; install it (Debian: apt install chromium).")
    port = _free_port()
    demo = Path(__file__).resolve().parents[1] / "demo.py"
    arguments = [argument for model in models for argument in ("--model", model)]
    server = subprocess.Popen(
        [sys.executable, str(demo), *arguments, "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    chromium = None
    try:
        _wait_for_port(port, server, timeout)
        chromium = DevTools(browser, width, height)
        target = chromium.call("Target.createTarget", url=f"http://127.0.0.1:{port}/")["targetId"]
        session = chromium.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        # The page's own size, whatever the headless window's frame takes.
        chromium.call(
            "Emulation.setDeviceMetricsOverride", session, width=width, height=height, deviceScaleFactor=1,
            mobile=False,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not chromium.call("Runtime.evaluate", session, expression=HEAT_MAP_SHOWN)["result"].get(
            "value"
        ):
            if time.monotonic() > deadline:
                raise SystemExit(f"error: the page showed no heat map within {timeout:g} s.")
            time.sleep(1)
        time.sleep(1)  # let the other outputs of the same event paint
        png = chromium.call("Page.captureScreenshot", session, format="png")["data"]
        output.parent.mkdir(parents=True, exist_ok=True)
        with staged(output, "--output_file", folder=False) as staging:
            staging.write_bytes(base64.b64decode(png))
    finally:
        if chromium is not None:
            chromium.close()
        server.terminate()
        server.wait(timeout=30)
    return output


@dataclass
class ScreenshotArguments(Options):
    model: list[str] = field(metadata={"help": "As demo.py's --model; repeatable.", "action": "extend"})
    output_file: str = field(default="docs/demo.png", metadata={"help": "PNG file to write."})
    timeout: float = field(default=300, metadata={"help": "Seconds to wait for the page.", "range": "> 0"})
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing output_file."})


def main() -> None:
    (args,) = parse_arguments(ScreenshotArguments, description=__doc__)
    check_output_location(args.output_file, args.overwrite, "--output_file")
    # Each model loads here first, so that a folder the page could not serve is named before the browser and
    # the server start (the server's own error would only end its process).
    for spec in resolve_model_specs(args.model, SHIPPED_MODELS):
        DemoModel.load(spec)
    print(f"Wrote {take_screenshot(args.model, Path(args.output_file), timeout=args.timeout)}")


if __name__ == "__main__":
    run_script(main)
