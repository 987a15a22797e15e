"""The README's screenshots, from a real run: ``squall demo`` feeding the word count, then
headless Chromium (Debian's ``chromium``) on its topology page.

    python scripts/screenshots.py [--rate 2000] [--run-s 90] [--out docs/img]

Writes ``topology-page.png`` (the DAG, the charts over the last 10 minutes, the errors)
and ``topology-component.png`` (the ``count`` bolt opened).
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--hide-scrollbars"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rate", type=float, default=2000, help="sentences per second")
    p.add_argument("--run-s", type=float, default=90,
                   help="how long the demo runs before the screenshots")
    p.add_argument("--out", default="docs/img", help="where the PNGs go")
    a = p.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        raise SystemExit("needs Debian's chromium (apt-get install chromium)")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="squall-shots-") as tmp:
        log = Path(tmp) / "demo.err"
        with open(log, "wb") as err:
            demo = subprocess.Popen([sys.executable, "-m", "squall.cli", "demo", "--rate",
                                     str(a.rate), "--workdir", str(Path(tmp) / "demo")],
                                    stdout=subprocess.DEVNULL, stderr=err)
        try:
            deadline = time.monotonic() + 300
            while not re.search(r"processed [1-9]", log.read_text()):
                if demo.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the demo did not start:\n" + log.read_text()[-3000:])
                time.sleep(1)
            api = re.search(r"API on (http://[\d.:]+)", log.read_text())
            assert api, log.read_text()[-2000:]
            print(f"demo running; screenshots in {a.run_s:.0f} s", file=sys.stderr)
            time.sleep(a.run_s)  # for the charts' history: wall time is the point
            tid = re.search(r"(wordcount-\d+-\d+)", log.read_text())
            assert tid, log.read_text()[-2000:]
            page = f"{api.group(1)}/ui/topologies/{tid.group(1)}"
            for name, url, height in (("topology-page.png", page, 900),
                                      ("topology-component.png",
                                       f"{page}#component=count", 1150)):
                subprocess.run([browser, *FLAGS, f"--user-data-dir={tmp}/profile-{name}",
                                f"--window-size=1400,{height}", "--virtual-time-budget=8000",
                                f"--screenshot={out / name}", url],
                               check=True, capture_output=True, timeout=120)
                print(f"wrote {out / name}", file=sys.stderr)
        finally:
            demo.send_signal(signal.SIGINT)
            try:
                demo.wait(120)
            except subprocess.TimeoutExpired:
                demo.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
