#!/usr/bin/env python3
"""Opens Chrome trace-event JSON files in a real viewer, offline, and reports.

The viewer is speedscope (npm `speedscope`, pinned by scripts/install-viewer.sh
into build-viewer/) in headless Debian Chromium. Each file is served with
speedscope's release folder from a throwaway HTTP server on 127.0.0.1 and
opened as `index.html#profileURL=...`; the browser's DOM (page title) and
console (stderr) say what happened:

  loaded          the title became "<served name> - speedscope"
  importer        which speedscope importer took it ("Trace Event Format
                  profile" for trace-event JSON)
  nesting_errors  console lines "Tried to end X when Y was on the top of the
                  stack" (a child that ends after its parent, B/E mismatch)
  unclosed_frames "Frame X was still open at end of profile"
  other_errors    anything else that is not speedscope's or WebGL's routine
                  chatter ("Could not find events for key: undefined",
                  "Failed to load format", uncaught exceptions, ...)

docs/viewer-check.md says more. Standard library only.

  tools/viewer/speedscope_check.py trace.json [more.json ...] [--json OUT]
  tools/viewer/speedscope_check.py --compare recorded.json=aligned.json

Exit 0: every file loaded (and every --compare held); 1: a file did not
load, or an aligned file loaded worse than its recorded one; 2: usage or
setup problem (no speedscope, no chromium: scripts/install-viewer.sh).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import functools
import html
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_SPEEDSCOPE = os.path.join(ROOT, "build-viewer", "node_modules", "speedscope")
INSTALL_HINT = "scripts/install-viewer.sh installs it"
FIRST_ERRORS = 5
KEPT_CONSOLE_LINES = 200

# Flags measured on these machines (REFERENCE.md §9): without the
# background-networking ones the closed network refuses many connections.
CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--enable-logging=stderr", "--v=0",
    "--dump-dom", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-default-browser-check", "--disable-extensions",
]

# Console lines that speedscope and software WebGL print on every load.
ROUTINE_CONSOLE = re.compile(
    r"^(speedscope v[\d.]+|WebGL initialized\.|import: [\d.]+ ?ms|Importing as |"
    r"\[\.WebGL-[^\]]*\]|\[\]Automatic fallback to software WebGL)")
NESTING = "Tried to end"
ALERT_TO_CONSOLE = b'<script>window.alert = function (m) { console.error("alert: " + m); };</script>'
UNCLOSED = "was still open at end of profile"
# Chromium's console lines: [pid:tid:date:LEVEL:CONSOLE:line] "text", source: URL (line)
CONSOLE_LINE = re.compile(
    r'^\[[^\]]*:CONSOLE[^\]]*\] "(.*?)", source: (\S*) \(\d+\)$', re.S | re.M)


@dataclass
class FileResult:
    file: str
    served_as: str = ""
    loaded: bool = False
    title: str = ""
    importer: str | None = None
    nesting_errors: int = 0
    first_nesting_errors: list[str] = field(default_factory=list)
    unclosed_frames: int = 0
    other_errors: list[str] = field(default_factory=list)
    fetched: bool = False
    timed_out: bool = False
    browser_rc: int | None = None
    wall_s: float = 0.0
    screenshot: str | None = None
    console: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- the server

def served_name(index: int, path: str) -> str:
    """A URL-safe name that no speedscope importer matches by name.

    speedscope picks some importers by file name (".chrome.json",
    "Trace-YYYYMMDDTHHMMSS", ".speedscope.json", "-recording.json", ...):
    the served name keeps only the stem's letters, digits, '_' and '-', dots
    made '_', so that the file's contents alone choose the importer.
    """
    stem = os.path.basename(path)
    if stem.lower().endswith(".json"):
        stem = stem[:-5]
    stem = re.sub(r"[^A-Za-z0-9_-]", "_", stem)[:60] or "trace"
    stem = re.sub(r"(Trace|Profile)-(\d{8})T", r"\1_\2T", stem)
    if stem.endswith("-recording"):
        stem += "_"
    return f"{index:02d}-{stem}.json"


STRING_PID = re.compile(rb'"pid"\s*:\s*"((?:[^"\\]|\\.)*)"')
STRING_PID_BASE = 1_000_000_000  # above any numeric pid a real trace has


def number_string_pids(text: bytes) -> bytes:
    """Every `"pid": "<string>"` made `"pid": <number>`, one number per string.

    speedscope 1.25 does not load a trace whose pids are strings ("Could not
    find events for key: undefined"), and torch 1.13's legacy profiler writes
    "CPU functions". Only the pid's spelling changes; times, names and
    nesting are the file's own.
    """
    numbers: dict[bytes, int] = {}

    def number(m: re.Match) -> bytes:
        n = numbers.setdefault(m.group(1), STRING_PID_BASE + len(numbers))
        return b'"pid":' + str(n).encode()

    return STRING_PID.sub(number, text)


class Handler(http.server.SimpleHTTPRequestHandler):
    """speedscope's release folder at /, each trace at /t/<served name>."""

    traces: dict[str, str] = {}
    fetched: set[str] = set()
    numbered_pids = False  # --number-string-pids

    def do_GET(self):  # noqa: N802 (the base class's name)
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if path == "/index.html":
            return self.send_index()
        if not path.startswith("/t/"):
            return super().do_GET()
        name = path[3:]
        source = self.traces.get(name)
        if source is None:
            return self.send_error(404)
        try:
            if self.numbered_pids:
                with open(source, "rb") as f:
                    body = number_string_pids(f.read())
                self.send_head_for(len(body), "application/json")
                self.wfile.write(body)
            else:
                with open(source, "rb") as f:
                    self.send_head_for(os.fstat(f.fileno()).st_size, "application/json")
                    shutil.copyfileobj(f, self.wfile)
            self.fetched.add(name)
        except OSError as e:
            self.send_error(404, str(e))

    def send_index(self):
        """speedscope's index.html with alert() made a console line.

        speedscope reports "Unrecognized format!" (a file that is not JSON)
        with alert(), and a dialog in headless Chromium stops the page until
        the timeout: the check logs it instead.
        """
        with open(os.path.join(self.directory, "index.html"), "rb") as f:
            page = f.read().replace(b"<head>", b"<head>" + ALERT_TO_CONSOLE, 1)
        self.send_head_for(len(page), "text/html; charset=utf-8")
        self.wfile.write(page)

    def send_head_for(self, size: int, content_type: str):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(size))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()

    def log_message(self, *args):
        pass


class TraceServer:
    """A ThreadingHTTPServer on 127.0.0.1, a free port, in a daemon thread."""

    def __init__(self, release_dir: str, traces: dict[str, str], numbered_pids: bool = False):
        handler = type("BoundHandler", (Handler,), {"traces": dict(traces), "fetched": set(),
                                                    "numbered_pids": numbered_pids})
        self.handler = handler
        self.httpd = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=release_dir))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def page_url(self, name: str) -> str:
        base = f"http://127.0.0.1:{self.port}"
        return f"{base}/index.html#profileURL={base}/t/{name}"


# ---------------------------------------------------------------- the browser

class BROWSERS:
    """The browsers running now, so that an interrupted run ends them all."""

    lock = threading.Lock()
    live: set[subprocess.Popen] = set()
    stopping = False

    @classmethod
    def stop_all(cls) -> None:
        with cls.lock:
            cls.stopping = True
            for proc in cls.live:
                signal_group(proc, signal.SIGKILL)


def run_browser(chromium: str, url: str, timeout_s: float, virtual_ms: int,
                screenshot: str | None) -> tuple[str, str, int | None, bool]:
    """Runs headless Chromium on url; returns (dom, stderr, rc, timed_out).

    The browser runs in a session of its own, with a fresh profile, so that a
    timeout kills it and every process it started.
    """
    argv = [chromium, *CHROMIUM_FLAGS, f"--virtual-time-budget={virtual_ms}"]
    if screenshot:
        argv += [f"--screenshot={screenshot}", "--window-size=1600,900"]
    with tempfile.TemporaryDirectory(prefix="speedscope-check-", ignore_cleanup_errors=True) as tmp:
        profile = os.path.join(tmp, "profile")
        out_path, err_path = os.path.join(tmp, "dom"), os.path.join(tmp, "stderr")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            with BROWSERS.lock:
                if BROWSERS.stopping:
                    raise RuntimeError("stopping")
                proc = subprocess.Popen(argv + [f"--user-data-dir={profile}", url],
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=tmp,
                                        start_new_session=True)
                BROWSERS.live.add(proc)
            timed_out = False
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out, rc = True, None
            finally:
                kill_group(proc, timed_out)
                with BROWSERS.lock:
                    BROWSERS.live.discard(proc)
        with open(out_path, "rb") as f:
            dom = f.read().decode("utf-8", "replace")
        with open(err_path, "rb") as f:
            stderr = f.read().decode("utf-8", "replace")
    return dom, stderr, rc, timed_out


def kill_group(proc: subprocess.Popen, timed_out: bool) -> None:
    """Ends the browser's process group.

    After a normal exit the helpers spend another second shutting down:
    nothing of theirs is wanted, so they are killed at once. A browser past
    its time gets SIGTERM first, then SIGKILL.
    """
    if timed_out:
        signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
    signal_group(proc, signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and group_has_live_members(proc.pid):
        time.sleep(0.02)


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_has_live_members(pgid: int) -> bool:
    """Whether a process of the group is still running (zombies do not count:
    killed helpers wait for whoever adopted them to reap them, which here
    took a second)."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return False
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


# ---------------------------------------------------------------- reading what happened

def console_messages(stderr: str) -> list[str]:
    return [m.group(1) for m in CONSOLE_LINE.finditer(stderr)]


def page_title(dom: str) -> str:
    m = re.search(r"<title>(.*?)</title>", dom, re.S)
    return html.unescape(m.group(1)).strip() if m else ""


def classify(result: FileResult, dom: str, stderr: str) -> None:
    messages = console_messages(stderr)
    result.console = messages[:KEPT_CONSOLE_LINES]
    result.title = page_title(dom)
    result.loaded = result.title == f"{result.served_as} - speedscope"
    for text in messages:
        first_line = text.splitlines()[0] if text else ""
        if first_line.startswith("Importing as ") and result.importer is None:
            result.importer = first_line[len("Importing as "):]
        elif NESTING in text:
            result.nesting_errors += 1
            if len(result.first_nesting_errors) < FIRST_ERRORS:
                result.first_nesting_errors.append(text)
        elif UNCLOSED in text:
            result.unclosed_frames += 1
        elif not ROUTINE_CONSOLE.match(text):
            result.other_errors.append(text)
    if "Something went wrong" in dom:
        result.other_errors.append("page shows: Something went wrong")
    if not result.fetched:
        result.other_errors.append("the browser never fetched the file")
    if result.timed_out:
        result.other_errors.append("the browser timed out")
    elif result.browser_rc not in (0, None):
        result.other_errors.append(f"the browser exited {result.browser_rc}")


def check_file(server: TraceServer, chromium: str, path: str, name: str, args) -> FileResult:
    result = FileResult(file=path, served_as=name)
    shot = os.path.join(os.path.abspath(args.screenshot_dir), name[:-5] + ".png") if args.screenshot_dir else None
    start = time.monotonic()
    dom, stderr, result.browser_rc, result.timed_out = run_browser(
        chromium, server.page_url(name), args.timeout_s, args.virtual_time_ms, shot)
    result.wall_s = round(time.monotonic() - start, 3)
    result.fetched = name in server.handler.fetched
    if shot and os.path.exists(shot):
        result.screenshot = shot
    classify(result, dom, stderr)
    return result


# ---------------------------------------------------------------- the command line

def summary_line(r: FileResult) -> str:
    state = "loaded" if r.loaded else "NOT LOADED"
    parts = [f"{r.file}: {state}", f"importer={r.importer or '-'}",
             f"nesting_errors={r.nesting_errors}", f"unclosed={r.unclosed_frames}",
             f"other_errors={len(r.other_errors)}", f"{r.wall_s:.2f} s"]
    line = "  ".join(parts)
    for text in r.first_nesting_errors[:3]:
        line += f"\n    nesting: {text}"
    for text in r.other_errors[:3]:
        line += f"\n    error: {text.splitlines()[0][:300] if text else text}"
    return line


def parse_compare(specs: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for spec in specs:
        recorded, sep, aligned = spec.partition("=")
        if not sep or not recorded or not aligned:
            raise ValueError(f"--compare wants RECORDED=ALIGNED, got {spec!r}")
        pairs.append((recorded, aligned))
    return pairs


def compare_verdicts(pairs, results: dict[str, FileResult]) -> tuple[list[dict], bool]:
    verdicts, ok_all = [], True
    for recorded, aligned in pairs:
        r, a = results[recorded], results[aligned]
        ok = a.loaded and (not r.loaded or a.nesting_errors <= r.nesting_errors)
        if not a.loaded:
            why = "the aligned file did not load"
        elif not r.loaded:
            why = "the recorded file did not load; the aligned one did"
        elif ok:
            why = "aligned has no more nesting errors than recorded"
        else:
            why = "aligned has more nesting errors than recorded"
        print(f"compare: recorded {recorded}: {'loaded' if r.loaded else 'NOT LOADED'}, "
              f"{r.nesting_errors} nesting errors; aligned {aligned}: "
              f"{'loaded' if a.loaded else 'NOT LOADED'}, {a.nesting_errors} nesting errors: "
              f"{'ok' if ok else 'FAIL'} ({why})")
        verdicts.append({"recorded": recorded, "aligned": aligned, "ok": ok, "why": why,
                         "recorded_nesting_errors": r.nesting_errors,
                         "aligned_nesting_errors": a.nesting_errors})
        ok_all &= ok
    return verdicts, ok_all


def release_dir(speedscope: str) -> str | None:
    for candidate in (speedscope, os.path.join(speedscope, "dist", "release")):
        if os.path.isfile(os.path.join(candidate, "index.html")):
            return candidate
    return None


def find_chromium(given: str | None) -> str | None:
    if given:
        return given if os.access(given, os.X_OK) else shutil.which(given)
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Open Chrome trace-event JSON files in speedscope (headless Chromium, "
                    "offline) and report whether each loads and how many nesting errors "
                    "the viewer logs. docs/viewer-check.md.",
        epilog="Exit 0: all loaded (and every --compare held); 1: a file did not load or a "
               "--compare failed; 2: usage or setup problem (scripts/install-viewer.sh).")
    p.add_argument("files", nargs="*", metavar="FILE", help="trace JSON files")
    p.add_argument("--speedscope", default=DEFAULT_SPEEDSCOPE, metavar="DIR",
                   help="speedscope's npm package folder or its dist/release folder "
                        "(default: %(default)s, where scripts/install-viewer.sh puts it)")
    p.add_argument("--chromium", metavar="PATH", help="the browser (default: chromium on PATH)")
    p.add_argument("--timeout-s", type=float, default=60.0,
                   help="wall-clock limit per file; the browser is killed past it (default 60)")
    p.add_argument("--virtual-time-ms", type=int, default=15000,
                   help="Chromium's --virtual-time-budget (default 15000)")
    p.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                   help="browsers run at once (default: min(4, CPUs))")
    p.add_argument("--json", metavar="OUT", help="write every result (and comparison) as JSON")
    p.add_argument("--screenshot-dir", "--screenshot", metavar="DIR",
                   help="write a 1600x900 PNG of each page here")
    p.add_argument("--number-string-pids", action="store_true",
                   help="serve each file with string pids made numbers (speedscope cannot load "
                        "string pids, which torch 1.13's legacy profiler writes); times untouched")
    p.add_argument("--compare", action="append", default=[], metavar="RECORDED=ALIGNED",
                   help="check both; fail when ALIGNED does not load or has more nesting "
                        "errors than RECORDED (repeatable)")
    args = p.parse_args(argv)
    try:
        args.pairs = parse_compare(args.compare)
    except ValueError as e:
        p.error(str(e))
    if not args.files and not args.pairs:
        p.error("no FILE and no --compare given")
    if args.timeout_s <= 0 or args.jobs < 1 or args.virtual_time_ms < 0:
        p.error("--timeout-s and --jobs must be positive, --virtual-time-ms not negative")
    return args


def setup(args) -> tuple[str, str, list[str]] | str:
    """The release folder, the browser and the files, or a setup problem."""
    release = release_dir(args.speedscope)
    if release is None:
        return f"no speedscope at {args.speedscope} ({INSTALL_HINT})"
    chromium = find_chromium(args.chromium)
    if chromium is None:
        return f"no chromium ({args.chromium or 'chromium on PATH'}; {INSTALL_HINT})"
    files = list(dict.fromkeys(args.files + [f for pair in args.pairs for f in pair]))
    for f in files:
        if not os.path.isfile(f):
            return f"no such file: {f}"
    if args.screenshot_dir:
        os.makedirs(args.screenshot_dir, exist_ok=True)
    return release, chromium, files


def main(argv=None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    ready = setup(args)
    if isinstance(ready, str):
        print(f"speedscope_check: {ready}", file=sys.stderr)
        return 2
    release, chromium, files = ready
    names = {f: served_name(i, f) for i, f in enumerate(files)}
    results: dict[str, FileResult] = {}
    with TraceServer(release, {n: os.path.abspath(f) for f, n in names.items()},
                     args.number_string_pids) as server:
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
        try:
            futures = {f: pool.submit(check_file, server, chromium, f, names[f], args) for f in files}
            for f in files:
                results[f] = futures[f].result()
                print(summary_line(results[f]), flush=True)
        finally:  # also on ^C or SIGTERM: no browser outlives the run
            pool.shutdown(wait=False, cancel_futures=True)
            BROWSERS.stop_all()
            pool.shutdown(wait=True)
    verdicts, compare_ok = compare_verdicts(args.pairs, results)
    loaded_ok = all(r.loaded for f, r in results.items() if f in args.files)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"files": [asdict(results[f]) for f in files], "compare": verdicts,
                       "speedscope": release, "chromium": chromium}, out, indent=2)
    return 0 if loaded_ok and compare_ok else 1


if __name__ == "__main__":
    sys.exit(main())
