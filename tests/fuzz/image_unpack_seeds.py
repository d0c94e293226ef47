#!/usr/bin/env python3
"""Writes the seeds of the image_unpack harness (tests/fuzz/corpus/image_unpack/).

Run once; the archives are checked in. Each is a small tar the unpacker
reads a different way: a root filesystem with every accepted kind of
member, one with a whiteout (refused there), an OCI layout of two layers
(gzip, then plain with whiteouts), a docker save archive, and the hostile
shapes it must refuse ('..', a member through a link, a set-uid file)
and links one byte from climbing out.
Times, owners and gzip headers are fixed so that a rerun writes the same
bytes.

    python3 tests/fuzz/image_unpack_seeds.py [DIR]
"""
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

MTIME = 1700000000


def member(name, kind=tarfile.REGTYPE, data=b"", mode=0o644, link=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.linkname = link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data


def tar(members, fmt=tarfile.USTAR_FORMAT):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as t:
        for info, data in members:
            t.addfile(info, io.BytesIO(data) if info.isreg() else None)
    # tarfile pads to 10 KiB; the two zero blocks that end an archive are
    # enough, and a small seed leaves the fuzzer's mutations on headers.
    data = out.getvalue().rstrip(b"\0")
    return data + b"\0" * (-len(data) % 512 + 1024)


def d(name, mode=0o755):
    return member(name, tarfile.DIRTYPE, mode=mode)


def f(name, data, mode=0o644):
    return member(name, data=data, mode=mode)


def sym(name, target):
    return member(name, tarfile.SYMTYPE, mode=0o777, link=target)


def hard(name, target):
    return member(name, tarfile.LNKTYPE, link=target)


def digest(blob):
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def blob_member(blob):
    return f("blobs/sha256/" + hashlib.sha256(blob).hexdigest(), blob)


def compact(value):
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def rootfs():
    return tar([
        d("./"),
        d("etc/"),
        f("etc/hostname", b"image\n"),
        sym("etc/name", "hostname"),  # relative
        d("usr/"),
        d("usr/bin/"),
        f("usr/bin/tool", b"#!/bin/sh\necho tool\n", 0o755),
        sym("bin", "/usr/bin"),  # absolute: from the image's root
        hard("etc/hostname.again", "etc/hostname"),
        d("tmp/", 0o1777),
    ])


def whiteout():
    return tar([d("etc/"), f("etc/gone", b"x\n"), f("etc/.wh.gone", b"")])


def oci():
    layer1 = tar([
        d("etc/"),
        f("etc/os-release", b"ID=seed\n"),
        f("etc/gone", b"lower\n"),
        d("var/"),
        d("var/cache/"),
        f("var/cache/old", b"lower\n"),
        sym("sbin", "usr/sbin"),
    ])
    layer1 = gzip.compress(layer1, mtime=0)
    layer2 = tar([
        f("etc/.wh.gone", b""),
        d("var/cache/"),
        f("var/cache/.wh..wh..opq", b""),
        f("var/cache/new", b"upper\n"),
    ])
    config = compact({
        "architecture": "amd64",
        "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": [digest(gzip.decompress(layer1)), digest(layer2)]},
    })
    manifest = compact({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": digest(config), "size": len(config)},
        "layers": [
            {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
             "digest": digest(layer1), "size": len(layer1)},
            {"mediaType": "application/vnd.oci.image.layer.v1.tar",
             "digest": digest(layer2), "size": len(layer2)},
        ],
    })
    index = compact({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": digest(manifest), "size": len(manifest),
                       "platform": {"architecture": "amd64", "os": "linux"}}],
    })
    return tar([
        f("oci-layout", compact({"imageLayoutVersion": "1.0.0"})),
        f("index.json", index),
        d("blobs/"),
        d("blobs/sha256/"),
        blob_member(manifest),
        blob_member(config),
        blob_member(layer1),
        blob_member(layer2),
    ])


def docker_save():
    layer = tar([d("etc/"), f("etc/os-release", b"ID=docker\n")])
    layer_id = hashlib.sha256(b"layer").hexdigest()
    config = compact({"os": "linux", "rootfs": {"type": "layers", "diff_ids": [digest(layer)]}})
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = compact([{"Config": config_name, "RepoTags": ["seed:1"],
                         "Layers": [layer_id + "/layer.tar"]}])
    return tar([
        f("manifest.json", manifest),
        f(config_name, config),
        d(layer_id + "/"),
        f(layer_id + "/layer.tar", layer),
    ])


def dotdot():
    return tar([d("etc/"), f("../escaped", b"out\n")])


def through_link():
    return tar([d("etc/"), sym("etc/up", "/"), f("etc/up/etc/passwd", b"through\n")])


def links_at_the_edge():
    # Each target stays in the image, one byte from climbing out of it
    # ('x' to '.'), so a mutation that a missing check lets through is near.
    return tar([
        d("a/"),
        d("a/b/"),
        f("a/b/file", b"edge\n"),
        sym("a/b/up", "../../.x"),
        sym("a/b/abs", "/.x"),
        sym("a/b/side", "../b/./../.x/file"),
        sym("top", ".x"),
        hard("a/again", "a/b/file"),
    ])


def setuid():
    # One byte past the archive's end: an odd length, so the harness sets
    # drop_setid and the file is imported with its bit cleared.
    return tar([d("usr/"), d("usr/bin/"), f("usr/bin/su", b"#!/bin/sh\n", 0o4755)]) + b"\0"


SEEDS = {
    "rootfs.tar": rootfs,
    "whiteout-in-rootfs.tar": whiteout,
    "oci-two-layers.tar": oci,
    "docker-save.tar": docker_save,
    "dotdot.tar": dotdot,
    "member-through-link.tar": through_link,
    "setuid-dropped.tar": setuid,
    "links-at-the-edge.tar": links_at_the_edge,
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "image_unpack")
    os.makedirs(out, exist_ok=True)
    for name, make in SEEDS.items():
        data = make()
        assert len(data) < 64 * 1024, name
        with open(os.path.join(out, name), "wb") as fh:
            fh.write(data)


if __name__ == "__main__":
    main()
