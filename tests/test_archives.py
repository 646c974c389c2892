"""Hostile and awkward archives beyond tests/test_bundle.py: bombs, depth, member caps, links, FIFOs.

Caps are made small with ``Limits`` so every bomb stays a few kilobytes on disk. Each case must give
a clear problem row, and nothing may be written outside the work directory.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
import tarfile
import time
import zipfile
import zlib
from pathlib import Path

import pytest

from toolkit.bundle import Limits, open_bundle
from toolkit.ingest import parse_bundle

LINE = (b"[2026-03-07 14:02:11,408] INFO stream-thread [orders-agg-0-StreamThread-1] State transition from "
        b"PARTITIONS_ASSIGNED to RUNNING (org.apache.kafka.streams.processor.internals.StreamThread)\n")
SECRET = b"top secret outside the bundle\n"


def _tar_gz(members: dict[str, bytes], *, special: dict[str, bytes] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_772_892_000
            tf.addfile(info, io.BytesIO(data))
        for name, kind in (special or {}).items():
            info = tarfile.TarInfo(name)
            info.type = kind
            tf.addfile(info)
    return buf.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _snapshot(root: Path, skip: str) -> dict[str, str]:
    """Every path under root (except the skip folder) with a hash of its content or its link target."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if rel == skip or rel.startswith(skip + "/"):
            continue
        if p.is_symlink():
            out[rel] = "->" + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha1(p.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
    return out


def _problems(bundle) -> set[tuple[str, str]]:
    return {(p.source, p.problem) for p in bundle.problems}


def _nested(depth: int, leaf: bytes) -> bytes:
    """zip inside tar.gz inside zip ... ``depth`` archives deep, a log at the bottom."""
    data, name = leaf, "app.log"
    for level in range(depth):
        if level % 2 == 0:
            data, name = _zip({name: data}), f"level{level}.zip"
        else:
            data, name = _tar_gz({name: data}), f"level{level}.tar.gz"
    return data


@pytest.fixture
def hostile(tmp_path):
    """A bundle of small hostile archives plus an outside directory that must stay untouched."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.log").write_bytes(SECRET)
    b = tmp_path / "bundle"
    for host in ("host-a", "host-b", "host-c"):
        (b / host).mkdir(parents=True)
    zeros = b"\0" * (2 << 20)
    (b / "host-a" / "zipbomb.zip").write_bytes(_zip({"big.log": zeros}))                     # ratio ~1000:1
    (b / "host-a" / "tarbomb.tar.gz").write_bytes(_tar_gz({"big.log": b"\0" * (17 << 20)}))  # ~17 KB on disk
    (b / "host-a" / "gzbomb.log.gz").write_bytes(gzip.compress(b"\0" * (5 << 20), 9, mtime=0))   # ~5 KB on disk
    # 300 KB parts: under the 1 MiB floor of the ratio check, so only the total cap can stop them.
    (b / "host-b" / "total.zip").write_bytes(_zip({f"part-{i}.log": b"\0" * 300_000 for i in range(10)}))
    (b / "host-b" / "deep.tar.gz").write_bytes(_nested(4, LINE))
    (b / "host-b" / "outer.tar.gz").write_bytes(_tar_gz({"inner.zip": _zip({"var/log/app.log": LINE})}))
    (b / "pods.tar.gz").write_bytes(_tar_gz({"pod-7/app.log": LINE, "pod-8/logs.zip": _zip({"x/app.log": LINE})}))
    (b / "host-c" / "fifo.tar.gz").write_bytes(
        _tar_gz({"ok.log": LINE}, special={"pipe.log": tarfile.FIFOTYPE, "blk": tarfile.BLKTYPE}))
    os.symlink(outside / "secret.log", b / "host-c" / "app.log")        # file link out of the bundle
    os.symlink(outside, b / "host-c" / "logs")                           # directory link out of the bundle
    os.symlink("../../outside/secret.log", b / "host-c" / "rel.log")     # relative link out
    limits = Limits(max_members=1000, max_total_bytes=(5 << 20) // 2, max_member_bytes=3 << 20, max_ratio=100.0, max_depth=3)
    return tmp_path, b, limits


def test_bombs_caps_depth_links_and_fifos_each_give_a_problem(hostile):
    tmp_path, b, limits = hostile
    before = _snapshot(tmp_path, skip="work")
    bundle = open_bundle(b, tmp_path / "work", limits=limits)
    assert _snapshot(tmp_path, skip="work") == before  # bundle and outside untouched, nothing new beside them
    problems = _problems(bundle)

    assert ("host-a/zipbomb.zip!/big.log", "compression ratio too high (archive bomb?)") in problems
    assert ("host-a/tarbomb.tar.gz", "compression ratio too high (archive bomb?)") in problems
    assert ("host-a/gzbomb.log.gz", "compression ratio too high (gzip bomb?)") in problems
    too_large = {s for s, p in problems if p == "member too large"}
    assert too_large == {"host-b/total.zip!/part-8.log", "host-b/total.zip!/part-9.log"}
    assert ("host-b/deep.tar.gz!/level2.zip!/level1.tar.gz!/level0.zip", "archive nested too deeply") in problems
    assert ("host-c/fifo.tar.gz!/pipe.log", "special file in archive not extracted") in problems
    assert ("host-c/fifo.tar.gz!/blk", "special file in archive not extracted") in problems
    for link in ("host-c/app.log", "host-c/logs", "host-c/rel.log"):
        assert (link, "symbolic link not followed") in problems

    # Bombs were stopped before they were written: the work folder stays small.
    work_bytes = sum(p.stat().st_size for p in (tmp_path / "work").rglob("*") if p.is_file())
    assert work_bytes < 8 << 20
    assert not any("big.log" in str(p) for p in (tmp_path / "work").rglob("*") if p.stat().st_size > 1 << 20)
    # The gzip bomb is stopped at the member cap, and its zeros are not read as a log.
    (gunzipped,) = (tmp_path / "work" / "gunzipped").glob("*gzbomb.log")
    assert gunzipped.stat().st_size == limits.max_member_bytes
    assert ("host-a/gzbomb.log.gz", "binary content, not read as a log") in problems
    assert "host-a/gzbomb.log.gz" not in {f.source for f in bundle.logs}

    # Nothing of the outside world is read as evidence.
    for f in bundle.logs:
        assert f.local_path.resolve().is_relative_to(b.resolve()) or \
            f.local_path.resolve().is_relative_to((tmp_path / "work").resolve()), f
        assert SECRET not in f.local_path.read_bytes()


def test_member_cap_is_per_bundle_and_names_every_archive_it_cuts(tmp_path):
    b = tmp_path / "bundle" / "host-m"
    b.mkdir(parents=True)
    for name in ("a", "b", "c"):
        (b / f"{name}.zip").write_bytes(_zip({f"m/{i:03d}.log": LINE for i in range(30)}))
    bundle = open_bundle(tmp_path / "bundle", tmp_path / "work", limits=Limits(max_members=50))
    per_archive = {n: sum(1 for f in bundle.logs if f.source.startswith(f"host-m/{n}.zip!/")) for n in "abc"}
    assert per_archive == {"a": 30, "b": 20, "c": 0}
    capped = [(p.source, p.detail) for p in bundle.problems if p.problem == "too many archive members"]
    assert [s for s, _ in capped] == ["host-m/b.zip!/m/020.log", "host-m/c.zip!/m/000.log"]
    assert all("limit 50" in d for _, d in capped)


def test_nested_archive_hosts(hostile):
    """Archive in archive in a host folder belongs to that host; an archive at the root uses its folders."""
    tmp_path, b, limits = hostile
    bundle = open_bundle(b, tmp_path / "work", limits=limits)
    hosts = {f.source: f.host for f in bundle.logs}
    assert hosts["host-b/outer.tar.gz!/inner.zip!/var/log/app.log"] == "host-b"
    assert hosts["pods.tar.gz!/pod-7/app.log"] == "pod-7"
    assert hosts["pods.tar.gz!/pod-8/logs.zip!/x/app.log"] == "pod-8"
    deep = [s for s in hosts if s.startswith("host-b/deep.tar.gz")]
    assert deep == []  # the log four archives down is beyond the depth limit, and a problem row says so


def test_depth_limit_is_a_parameter(tmp_path):
    b = tmp_path / "bundle" / "host-d"
    b.mkdir(parents=True)
    (b / "deep.tar.gz").write_bytes(_nested(4, LINE))
    bundle = open_bundle(tmp_path / "bundle", tmp_path / "work", limits=Limits(max_depth=4))
    assert [(f.source, f.host) for f in bundle.logs] == [
        ("host-d/deep.tar.gz!/level2.zip!/level1.tar.gz!/level0.zip!/app.log", "host-d")]
    assert not bundle.problems


def test_encrypted_zip_member_is_a_problem_not_a_crash(tmp_path):
    b = tmp_path / "bundle" / "host-e"
    b.mkdir(parents=True)
    raw = bytearray(_zip({"secret.log": LINE, "plain.log": LINE}))
    # Mark the first member "encrypted" (general purpose flag bit 0, local and central headers).
    raw[6] |= 0x1
    raw[raw.index(b"PK\x01\x02") + 8] |= 0x1
    (b / "enc.zip").write_bytes(bytes(raw))
    bundle = open_bundle(tmp_path / "bundle", tmp_path / "work")
    assert ("host-e/enc.zip!/secret.log", "corrupt archive member") in _problems(bundle)
    assert [f.source for f in bundle.logs] == ["host-e/enc.zip!/plain.log"]


def test_hostile_bundle_parses_and_writes_only_under_out(spark, hostile):
    """The whole hostile bundle through Spark: no crash, every file accounted, writes only in OUT."""
    tmp_path, b, limits = hostile
    before = _snapshot(tmp_path, skip="out")
    bundle = open_bundle(b, tmp_path / "out" / "work", limits=limits)
    _, report, records = parse_bundle(spark, bundle, tmp_path / "out")
    assert _snapshot(tmp_path, skip="out") == before
    assert all(f.accounted for f in report.files)
    assert records.where(records.message.contains(SECRET.decode().strip())).count() == 0
    files = {f.path: f for f in report.files}
    assert files["host-b/outer.tar.gz!/inner.zip!/var/log/app.log"].records == 1
    assert files["host-c/fifo.tar.gz!/ok.log"].records == 1


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_directory_times_survive_extraction(tmp_path, kind):
    """A state copy's directory times are evidence: extraction must not leave them at "now"."""
    dir_time, file_time = 1_771_400_469, 1_772_874_006  # 2026-02-18 07:41:09, 2026-03-07 09:00:06 UTC
    archive = tmp_path / "bundle" / "orders-agg-0" / f"state.{kind}"
    archive.parent.mkdir(parents=True)
    if kind == "zip":
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr(zipfile.ZipInfo("kafka-streams/", date_time=(2026, 2, 18, 7, 41, 10)), b"")
            zf.writestr(zipfile.ZipInfo("kafka-streams/orders-agg/0_0/.checkpoint", date_time=(2026, 3, 7, 9, 0, 6)),
                        b"0\n1\norders 0 42\n")
    else:
        with tarfile.open(archive, "w:gz") as tf:
            folder = tarfile.TarInfo("kafka-streams")
            folder.type, folder.mtime = tarfile.DIRTYPE, dir_time
            tf.addfile(folder)
            data = b"0\n1\norders 0 42\n"
            info = tarfile.TarInfo("kafka-streams/orders-agg/0_0/.checkpoint")
            info.size, info.mtime = len(data), file_time
            tf.addfile(info, io.BytesIO(data))
    bundle = open_bundle(tmp_path / "bundle", tmp_path / "work")
    root = next(p for p in (tmp_path / "work").rglob("kafka-streams") if p.is_dir())
    # zip stores local time with 2-second resolution; tar stores UTC seconds.
    expected = time.mktime((2026, 2, 18, 7, 41, 10, 0, 0, -1)) if kind == "zip" else dir_time
    assert abs(root.stat().st_mtime - expected) < 1, (root, root.stat().st_mtime)
    checkpoint = root / "orders-agg" / "0_0" / ".checkpoint"
    assert checkpoint.is_file() and not bundle.problems


def _hostile_members_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name in ("ok/app.log", "../escape.log", "/etc/abs.log", "a/../../up.log", "C:/drive.log"):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(LINE), 1_772_892_000
            tf.addfile(info, io.BytesIO(LINE))
        link = tarfile.TarInfo("ok/link.log")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(link)
        fifo = tarfile.TarInfo("ok/pipe.log")
        fifo.type = tarfile.FIFOTYPE
        tf.addfile(fifo)
    return buf.getvalue()


def _hostile_members_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name in ("ok/app.log", "../escape.log", "/etc/abs.log", "a/../../up.log", "C:/drive.log"):
            zf.writestr(zipfile.ZipInfo(name), LINE)
        for name, mode in (("ok/link.log", stat.S_IFLNK | 0o777), ("ok/pipe.log", stat.S_IFIFO | 0o644)):
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, b"/etc/passwd")
    return buf.getvalue()


@pytest.mark.parametrize("name,build", [("hostile.tar.gz", _hostile_members_tar), ("hostile.zip", _hostile_members_zip)])
def test_tar_and_zip_follow_one_member_policy(tmp_path, name, build):
    """The same hostile members in a tar and in a zip: the same files kept, the same problems, nothing written
    outside the extraction directory."""
    b = tmp_path / "bundle" / "host-z"
    b.mkdir(parents=True)
    (b / name).write_bytes(build())
    bundle = open_bundle(tmp_path / "bundle", tmp_path / "work")
    problems = {(p.source.split("!/", 1)[1], p.problem) for p in bundle.problems if "!/" in p.source}
    assert problems == {
        ("../escape.log", "unsafe path in archive"), ("/etc/abs.log", "unsafe path in archive"),
        ("a/../../up.log", "unsafe path in archive"), ("C:/drive.log", "unsafe path in archive"),
        ("ok/link.log", "link in archive not extracted"), ("ok/pipe.log", "special file in archive not extracted"),
    }
    assert [f.source.split("!/", 1)[1] for f in bundle.logs] == ["ok/app.log"]
    assert not (tmp_path / "escape.log").exists() and not (tmp_path / "work" / "escape.log").exists()


def test_truncated_tar_gz_keeps_every_byte_of_the_member_it_cuts(spark, tmp_path, repo_root):
    """A ``.tar.gz`` cut inside a log keeps the log's decodable part (as a cut ``.gz`` log does), with a
    problem row that says how much was kept: a dying pod's last lines are the evidence."""
    sample = repo_root / "sample_logs" / "kafka-eos-stale-checkpoint"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for rel in ("orders-agg-0/state.tar.gz", "orders-agg-0/app.log", "orders-agg-1/app.log"):
            tf.add(sample / rel, arcname=rel)
    cut = buf.getvalue()[:4000]
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "logs.tar.gz").write_bytes(cut)
    with tarfile.open(fileobj=io.BytesIO(buf.getvalue())) as tf:
        member = tf.getmember("orders-agg-0/app.log")
    decodable = zlib.decompressobj(wbits=31).decompress(cut)  # all a gzip stream decodes before its cut
    original = (sample / "orders-agg-0" / "app.log").read_bytes()
    expected = original[: len(decodable) - member.offset_data]
    assert len(expected) > 8192  # more than one buffer of tarfile's reader, which the old copy lost whole

    bundle = open_bundle(tmp_path / "bundle", tmp_path / "out" / "work")
    logs = {f.source: f for f in bundle.logs}
    assert logs["logs.tar.gz!/orders-agg-0/app.log"].local_path.read_bytes() == expected
    assert "logs.tar.gz!/orders-agg-1/app.log" not in logs  # wholly after the cut
    (detail,) = [p.detail for p in bundle.problems if p.problem == "truncated or corrupt archive"]
    assert f"logs.tar.gz!/orders-agg-0/app.log cut short: the first {len(expected)} of {len(original)} bytes kept" in detail
    assert not [p for p in bundle.problems if p.problem == "empty file"]

    _, report, _ = parse_bundle(spark, bundle, tmp_path / "out")
    (app_log,) = [f for f in report.files if f.path == "logs.tar.gz!/orders-agg-0/app.log"]
    assert app_log.lines == len(expected.splitlines()) and app_log.accounted
    assert app_log.records == sum(1 for line in expected.splitlines() if line.startswith(b"[2026-"))
