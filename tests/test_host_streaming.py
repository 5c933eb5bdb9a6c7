"""256 MiB through HostFilesystem's streams grows peak memory by less than 16 MiB (issue 3)."""

from __future__ import annotations

import gc
import hashlib
import tracemalloc
from pathlib import Path

from workspacefs import HostFilesystem

MIB = 1024 * 1024
SIZE_MIB = 256


def test_256_mib_streams_in_fixed_memory(fast_tmp: Path) -> None:
    root = fast_tmp / "stream-ws"
    root.mkdir()
    with HostFilesystem(root, snapshot_dir=fast_tmp / "stream-snaps") as fs:
        chunk = bytes(range(256)) * (MIB // 256)
        expected = hashlib.sha256()
        gc.collect()
        tracemalloc.start()
        try:
            with fs.open_write("big.bin") as writer:
                for _ in range(SIZE_MIB):
                    writer.write(chunk)
                    expected.update(chunk)
            write_peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.reset_peak()
            actual = hashlib.sha256()
            with fs.open_read("big.bin") as reader:
                for part in reader:
                    actual.update(part)
            read_peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert actual.hexdigest() == expected.hexdigest()
        assert fs.stat("big.bin").size_bytes == SIZE_MIB * MIB
        assert write_peak < 16 * MIB, f"write peaked at {write_peak / MIB:.1f} MiB"
        assert read_peak < 16 * MIB, f"read peaked at {read_peak / MIB:.1f} MiB"
        fs.delete("big.bin")
