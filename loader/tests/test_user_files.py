"""``read_bounded`` reads what a file holds, up to its bound, whatever its size says.

It asks for the size ``fstat`` reports instead of a bound-sized buffer (a locked load
reads a small lock file on every first load), so a file whose size says less than it
holds — a device, a pipe — must still be read on to the same bound.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest
from kernelhub.user_files import read_bounded


@pytest.mark.parametrize("size", [0, 1, 7, 8])
def test_a_file_up_to_the_bound_is_read_whole(tmp_path: Path, size: int) -> None:
    path = tmp_path / "f"
    path.write_bytes(bytes(range(size)))
    assert read_bounded(path, limit=8) == bytes(range(size))


@pytest.mark.parametrize("size", [9, 4096])
def test_a_file_over_the_bound_is_refused_as_too_big(tmp_path: Path, size: int) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * size)
    with pytest.raises(OSError) as err:
        read_bounded(path, limit=8)
    assert err.value.errno == errno.EFBIG


def test_a_device_whose_size_says_nothing_is_still_bounded() -> None:
    with pytest.raises(OSError) as err:  # st_size 0, endless
        read_bounded(Path("/dev/zero"), limit=1024)
    assert err.value.errno == errno.EFBIG


@pytest.mark.parametrize(("written", "refused"), [(b"abc", False), (b"x" * 9, True)])
def test_a_pipe_is_read_to_its_end_or_its_bound(written: bytes, refused: bool) -> None:
    read_end, write_end = os.pipe()

    def write() -> None:
        os.write(write_end, written)
        os.close(write_end)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        path = Path(f"/proc/self/fd/{read_end}")
        if refused:
            with pytest.raises(OSError) as err:
                read_bounded(path, limit=8)
            assert err.value.errno == errno.EFBIG
        else:
            assert read_bounded(path, limit=8) == written
    finally:
        writer.join()
        os.close(read_end)
