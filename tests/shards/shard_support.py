"""Real webdataset tar shards written from generated images, some of them damaged on purpose."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from PIL import Image


def jpeg(seed: int, side: int = 48) -> bytes:
    image = Image.new("RGB", (side, side), ((seed * 37) % 256, (seed * 91) % 256, (seed * 13) % 256))
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90)
    return out.getvalue()


def write_shard(path: Path, samples: list[dict[str, bytes]]) -> Path:
    """A tar as webdataset's ShardWriter writes it: members `<key>.<ext>`, in sample order."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as archive:
        for sample in samples:
            key = sample["__key__"].decode()
            for extension, data in sample.items():
                if extension == "__key__":
                    continue
                info = tarfile.TarInfo(f"{key}.{extension}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return path


def good_sample(key: str, seed: int) -> dict[str, bytes]:
    return {
        "__key__": key.encode(),
        "jpg": jpeg(seed),
        "cls": str(seed % 10).encode(),
        "json": json.dumps({"caption": f"a colour {seed}"}).encode(),
    }


def write_faulty_shards(folder: Path) -> dict[str, str]:
    """Three shards of four samples; returns the planted faults as {scan key: finding kind}."""
    write_shard(folder / "train-000000.tar", [good_sample(f"s{n:04d}", n) for n in range(4)])
    broken = [good_sample(f"s{n:04d}", 10 + n) for n in range(4)]
    broken[1]["jpg"] = broken[1]["jpg"][: len(broken[1]["jpg"]) // 2]  # a JPEG cut in half, member whole
    broken[2]["json"] = b'{"caption": "unterminated'
    broken[3]["cls"] = b"cat"
    write_shard(folder / "train-000001.tar", broken)
    truncated = write_shard(folder / "train-000002.tar", [good_sample(f"s{n:04d}", 20 + n) for n in range(4)])
    with tarfile.open(truncated) as archive:
        third_image = next(m for m in archive.getmembers() if m.name == "s0002.jpg")
    data = truncated.read_bytes()
    truncated.write_bytes(data[: third_image.offset_data + third_image.size // 2])  # cut inside a member
    return {
        "train-000001.tar/s0001": "corrupt",
        "train-000001.tar/s0002": "corrupt",
        "train-000001.tar/s0003": "corrupt",
        "train-000002.tar/s0002": "corrupt",
        "train-000002.tar": "unreadable",
    }
