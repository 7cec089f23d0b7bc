"""Finding partition directories on any filesystem pyarrow reaches, and
reading them there.

Local paths (and file:// URIs) are read as kcodec.log reads them: segments
memory-mapped, nothing copied. On other filesystems (s3://, hdfs://, gs://,
...) executors read only the byte ranges of their splits; the driver copies
the small side files (.index, .timeindex, .txnindex, producer .snapshot
files, checkpoints) to a
temporary directory to plan, and reads a whole segment only where kcodec.log
has to scan one (the last segment's end offset, a timestamp lookup, or
read_committed on a log without .txnindex files).
"""
import fnmatch
import os
import re
import shutil
import tempfile
import weakref

import pyarrow.fs as pafs

from ..log.indexes import SNAPSHOT_NAME
from ..log.partition import (PARTITION_DIR, SEGMENT_NAME, PartitionLog, is_live_partition_dir,
                             is_not_live_copy, parse_partition_dir)
from ..log.segment import Segment

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_GLOB = re.compile(r"[*?\[]")
SIDE_FILE = re.compile(r"^\d{20}\.(?:index|timeindex|txnindex)$|^leader-epoch-checkpoint$")


def filesystem_of(path):
    """(pyarrow FileSystem or None for the local disk, path on it)."""
    path = str(path)
    if path.startswith("file://"):
        path = path[len("file://"):]
    if not _URI.match(path):
        return None, os.path.abspath(os.path.expanduser(path))
    glob_at = _GLOB.search(path)
    prefix = path if glob_at is None else path[:path.rfind("/", 0, glob_at.start())]
    fs, inner = pafs.FileSystem.from_uri(prefix)
    return fs, inner + path[len(prefix):]


def _listing(fs, directory):
    """(name, is_dir, size, mtime) of the entries of a directory."""
    if fs is None:
        out = []
        with os.scandir(directory) as entries:
            for e in entries:
                is_dir = e.is_dir()
                stat = e.stat()
                out.append((e.name, is_dir, None if is_dir else stat.st_size, stat.st_mtime))
        return sorted(out)
    infos = fs.get_file_info(pafs.FileSelector(directory, allow_not_found=True))
    return sorted((os.path.basename(i.path), i.type == pafs.FileType.Directory, i.size,
                   i.mtime.timestamp() if i.mtime is not None else None) for i in infos)


def _is_dir(fs, path):
    if fs is None:
        return os.path.isdir(path)
    return fs.get_file_info(path).type == pafs.FileType.Directory


def _expand(fs, pattern):
    """Paths matching a glob pattern, walking one component at a time."""
    parts = pattern.split("/")
    found = ["/" if pattern.startswith("/") else ""]
    for part in parts:
        if not part:
            continue
        following = []
        for base in found:
            if _GLOB.search(part):
                names = [name for name, *_ in _listing(fs, base or ".")
                         if fnmatch.fnmatchcase(name, part)]
                following += [os.path.join(base, n) for n in names]
            else:
                following.append(os.path.join(base, part))
        found = following
    return found


def _holds_segments(fs, directory):
    return any(not is_dir and SEGMENT_NAME.match(name)
               for name, is_dir, *_ in _listing(fs, directory))


def partition_dirs(paths):
    """[(filesystem or None, directory)] of every partition directory the
    paths name (strings, URIs, or (pyarrow FileSystem, path) pairs):
    partition directories themselves, globs of them, or log.dirs roots
    (whose live partition directories are taken; copies being deleted or
    moved are not)."""
    found = []
    for given in paths:
        if isinstance(given, tuple):            # (pyarrow FileSystem, path on it)
            fs, pattern = given
        else:
            fs, pattern = filesystem_of(given)
        if _GLOB.search(pattern):
            matches = [m for m in _expand(fs, pattern)
                       if _is_dir(fs, m) and not is_not_live_copy(os.path.basename(m))]
        else:
            matches = [pattern] if _is_dir(fs, pattern) else []
        if not matches:
            raise FileNotFoundError(f"{given}: no such directory")
        for directory in matches:
            if _holds_segments(fs, directory):
                found.append((fs, directory))
                continue
            children = [(fs, os.path.join(directory, name))
                        for name, is_dir, *_ in _listing(fs, directory)
                        if is_dir and is_live_partition_dir(name)]
            if not children and PARTITION_DIR.match(os.path.basename(directory)):
                children = [(fs, directory)]        # a partition with no segments yet
            found += children
    seen, unique = set(), []
    for fs, directory in found:
        key = (None if fs is None else fs.type_name, directory)
        if key not in seen:
            seen.add(key)
            unique.append((fs, directory))
    if not unique:
        raise FileNotFoundError(f"no partition directories (<topic>-<partition>) under {paths}")
    return unique


def open_partition(fs, directory, **options):
    """A kcodec.log.PartitionLog for a directory on any filesystem."""
    if fs is None:
        return PartitionLog(directory, **options)
    return RemotePartitionLog(fs, directory, **options)


class RemoteSegment(Segment):
    """A segment on a remote filesystem: side files read from local copies,
    the .log itself fetched whole only when the driver must scan it."""

    def __init__(self, fs, remote_path, local_dir, size, mtime):
        super().__init__(os.path.join(local_dir, os.path.basename(remote_path)))
        self.fs, self.remote_path, self._size = fs, remote_path, size
        # largest_timestamp() falls back to the file's modification time.
        open(self.log_path, "wb").close()
        if mtime is not None:
            os.utime(self.log_path, (mtime, mtime))

    @property
    def data(self):
        if self._data is None:
            with self.fs.open_input_file(self.remote_path) as f:
                self._data = f.read_buffer()
        return self._data

    @property
    def size(self):
        return self._size

    def release(self, start, end):
        pass


class RemotePartitionLog(PartitionLog):
    def __init__(self, fs, directory, *, topic=None, partition=None, **options):
        local_dir = tempfile.mkdtemp(prefix="kcodec-log-")
        weakref.finalize(self, shutil.rmtree, local_dir, True)
        listing = _listing(fs, directory)
        for name, is_dir, _, _ in listing:
            if not is_dir and (SIDE_FILE.match(name) or SNAPSHOT_NAME.match(name)):
                pafs.copy_files(f"{directory}/{name}", os.path.join(local_dir, name),
                                source_filesystem=fs,
                                destination_filesystem=pafs.LocalFileSystem())
        parsed = parse_partition_dir(directory)
        # PartitionLog reads side files from its directory: give it the local
        # copy, then segments that read the remote .log files.
        super().__init__(local_dir, topic=parsed[0] if topic is None else topic,
                         partition=parsed[1] if partition is None else partition, **options)
        self.remote_directory = directory
        self.fs = fs
        self.segments = [RemoteSegment(fs, f"{directory}/{name}", local_dir, size, mtime)
                         for name, is_dir, size, mtime in listing
                         if not is_dir and SEGMENT_NAME.match(name)]
