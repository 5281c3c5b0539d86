"""Peak memory of one ``kernelhub-serve`` process for issue 33's three memory probes: an
inline (non-LFS) upload of a large file, concurrent downloads of it (whole and by
Range), and an anonymous oversized body to ``repos/create``.

The server's peak resident memory (``VmHWM``, reset between phases through
``/proc/<pid>/clear_refs``, which sets it to the resident memory at that moment) is read
after each phase: a phase's number is the larger of what the process still held when the
phase began and its peak during the phase. ``--baseline-src DIR`` runs the same
phases first against another ``kernelhub_serve`` source tree (e.g. one exported from an
older commit: ``git archive ce3233e serve | tar -x -C /tmp/old``, then
``--baseline-src /tmp/old/serve/src``) and prints both, with ratios. Linux only.

    .venv/bin/python benchmarks/serve_memory.py --size 150 --downloads 4
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT / "tests/serve"), str(REPO_ROOT / "tests"),
                str(REPO_ROOT / "loader/tests")]

REPO = "acme/memory"


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc (Linux only)")


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def upload_body(size: int) -> Iterator[bytes]:
    block = bytes(range(256)) * 3 * 1024  # 768 KiB; a multiple of 3, so base64 concatenates
    yield json.dumps({"key": "header", "value": {"summary": "memory probe"}}).encode() + b"\n"
    yield b'{"key": "file", "value": {"path": "big.bin", "encoding": "base64", "content": "'
    for _ in range(size // len(block)):
        yield base64.b64encode(block)
    yield b'"}}\n'


def run(label: str, src: str | None, size: int, downloads: int) -> dict[str, float]:
    from served import WRITE_TOKEN, serving_process, write_tokens_file

    writer = {"Authorization": f"Bearer {WRITE_TOKEN}"}
    saved = os.environ.get("PYTHONPATH")
    if src:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, saved) if p)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "hub").mkdir()
            tokens = write_tokens_file(root / "tokens.toml")
            with serving_process(root / "hub", tokens, root / "serve.log") as url, \
                    httpx.Client(timeout=600) as http:
                pid = _server_pid(url)
                http.post(f"{url}/api/repos/create", headers=writer,
                          json={"name": REPO, "type": "kernel"}).raise_for_status()
                results = {"idle": peak_mib(pid)}
                reset_peak(pid)
                http.post(f"{url}/api/kernels/{REPO}/commit/main", headers=writer,
                          content=upload_body(size)).raise_for_status()
                results["inline upload"] = peak_mib(pid)
                reset_peak(pid)
                file_url = f"{url}/kernels/{REPO}/resolve/main/big.bin"

                def download(i: int) -> None:
                    headers = {"Range": f"bytes={i * 1024}-"} if i % 2 else {}
                    with httpx.stream("GET", file_url, headers=headers, timeout=600) as answer:
                        for _ in answer.iter_bytes(1024 * 1024):
                            pass

                threads = [threading.Thread(target=download, args=(i,)) for i in range(downloads)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                results[f"{downloads} downloads"] = peak_mib(pid)
                reset_peak(pid)
                # the server may answer and close before the body is sent
                with contextlib.suppress(httpx.HTTPError):
                    http.post(f"{url}/api/repos/create", content=(b"x" * 1024**2 for _ in range(
                        400)), headers={"Content-Type": "application/json"})
                results["anonymous 400 MiB body"] = peak_mib(pid)
    finally:
        if src:
            if saved is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = saved
    print(f"  {label}: " + ", ".join(f"{k} {v:.0f} MiB" for k, v in results.items()))
    return results


def _server_pid(url: str) -> int:
    """The process listening on the server's port (found through /proc)."""
    port = int(url.rsplit(":", 1)[1])
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                inodes.add(fields[9])
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd).removeprefix("socket:[").removesuffix("]") in inodes:
                    return int(proc.name)
        except OSError:
            continue
    raise RuntimeError(f"no process listens on port {port}")


def main() -> None:
    from kernelhub.system import cpu_features

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=150, help="file size in MiB (default 150)")
    parser.add_argument("--downloads", type=int, default=4, help="concurrent downloads")
    parser.add_argument("--baseline-src", default=None,
                        help="a kernelhub_serve source tree to compare against")
    args = parser.parse_args()
    print(f"CPU: {cpu_features()}")
    print(f"peak RSS of the server process, {args.size} MiB file:")
    size = args.size * 1024**2
    mine = run("this tree", None, size, args.downloads)
    if args.baseline_src:
        base = run(f"baseline {args.baseline_src}", args.baseline_src, size, args.downloads)
        print("  ratios (this tree / baseline): " + ", ".join(
            f"{k} {mine[k] / base[k]:.2f}" for k in mine))


if __name__ == "__main__":
    main()
