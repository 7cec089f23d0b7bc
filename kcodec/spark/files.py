"""Finding partition directories on any filesystem pyarrow reaches, and
reading them there.

Local paths (and file:// URIs) are read as kcodec.log reads them: segments
memory-mapped, nothing copied. On other filesystems (s3://, hdfs://, gs://,
...) every read is a byte range: executors read only the ranges of their
splits; the driver copies the small side files (.index, .timeindex,
.txnindex, producer .snapshot files, checkpoints) to a temporary directory
to plan, and reads of a segment only the ranges planning needs (from the
last .index entry on for the log end offset, from an entry on for a
position or a timestamp), all of a segment only where kcodec.log has to
scan one (read_committed on a log without .txnindex files). s3:// paths
find their endpoint and credentials as kcodec.spark.storage says.
"""
import fnmatch
import os
import re
import shutil
import tempfile
import weakref
from concurrent.futures import ThreadPoolExecutor

import pyarrow.fs as pafs

from ..log.indexes import SNAPSHOT_NAME
from ..log.partition import (PARTITION_DIR, SEGMENT_NAME, PartitionLog, is_live_partition_dir,
                             is_not_live_copy, parse_partition_dir)
from ..log.segment import Segment
from ..records import read_batches
from .storage import Store, store_of

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_GLOB = re.compile(r"[*?\[]")
SIDE_FILE = re.compile(r"^\d{20}\.(?:index|timeindex|txnindex)$|^leader-epoch-checkpoint$")
# Bytes of a segment fetched at a time where planning scans one.
SCAN_WINDOW = 256 << 10
SIDE_FILE_FETCHES = 8


def filesystem_of(path, options=()):
    """(Store, or None for the local disk, path on it); `options`: the
    ``s3.*`` options (kcodec.spark.storage)."""
    path = str(path)
    if path.startswith("file://"):
        path = path[len("file://"):]
    if not _URI.match(path):
        return None, os.path.abspath(os.path.expanduser(path))
    return store_of(path, options)


def _listing(fs, directory):
    """(name, is_dir, size, mtime) of the entries of a directory."""
    if fs is None:
        out = []
        with os.scandir(directory) as entries:
            for e in entries:
                try:
                    is_dir = e.is_dir()
                    stat = e.stat()
                except FileNotFoundError:   # a live broker's checkpoint .tmp, gone
                    continue
                out.append((e.name, is_dir, None if is_dir else stat.st_size, stat.st_mtime))
        return sorted(out)
    with fs.errors(directory, "listing"):
        infos = fs.fs.get_file_info(pafs.FileSelector(directory, allow_not_found=True))
    return sorted((os.path.basename(i.path), i.type == pafs.FileType.Directory, i.size,
                   i.mtime.timestamp() if i.mtime is not None else None) for i in infos)


def _is_dir(fs, path):
    if fs is None:
        return os.path.isdir(path)
    with fs.errors(path, "looking up"):
        return fs.fs.get_file_info(path).type == pafs.FileType.Directory


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


def partition_dirs(paths, options=()):
    """[(Store or None, directory)] of every partition directory the paths
    name (strings, URIs, or (pyarrow FileSystem, path) pairs): partition
    directories themselves, globs of them, or log.dirs roots (whose live
    partition directories are taken; copies being deleted or moved are
    not). `options`: the ``s3.*`` options (kcodec.spark.storage)."""
    found, named = [], []
    for given in paths:
        if isinstance(given, tuple):            # (pyarrow FileSystem, path on it)
            fs, pattern = given
            fs = fs if isinstance(fs, Store) else Store(fs)
        else:
            fs, pattern = filesystem_of(given, options)
        named.append(pattern if fs is None else fs.uri(pattern)
                     + (f" ({fs.settings.where()})" if hasattr(fs, "settings") else ""))
        if _GLOB.search(pattern):
            matches = [m for m in _expand(fs, pattern)
                       if _is_dir(fs, m) and not is_not_live_copy(os.path.basename(m))]
        else:
            matches = [pattern] if _is_dir(fs, pattern) else []
        if not matches:
            if fs is None:
                raise FileNotFoundError(f"{given}: no such directory")
            raise fs.missing(pattern)
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
        key = (None if fs is None else fs.identity, directory)
        if key not in seen:
            seen.add(key)
            unique.append((fs, directory))
    if not unique:
        raise FileNotFoundError(f"no partition directories (<topic>-<partition>) under "
                                f"{', '.join(named)}")
    return unique


def open_partition(fs, directory, **options):
    """A kcodec.log.PartitionLog for a directory on any filesystem (a Store,
    a pyarrow filesystem, or None for the local disk)."""
    if fs is None:
        return PartitionLog(directory, **options)
    return RemotePartitionLog(fs if isinstance(fs, Store) else Store(fs), directory, **options)


class RemoteSegment(Segment):
    """A segment on a remote filesystem: side files read from local copies,
    the .log read in byte ranges (never whole unless a scan needs all of it).

    ``log_path`` is an empty local stand-in (its modification time the
    object's, for largest_timestamp); errors name ``uri``."""

    def __init__(self, store, remote_path, local_dir, size, mtime):
        super().__init__(os.path.join(local_dir, os.path.basename(remote_path)))
        self.store, self.remote_path, self._size = store, remote_path, size
        self.uri = store.uri(remote_path)
        open(self.log_path, "wb").close()
        if mtime is not None:
            os.utime(self.log_path, (mtime, mtime))
        self._file = None

    @property
    def fs(self):
        return self.store

    def _read(self, start, end):
        with self.store.errors(self.remote_path, "reading"):
            if self._file is None:
                self._file = self.store.fs.open_input_file(self.remote_path)
            data = self._file.read_at(end - start, start)
        if len(data) != end - start:
            from ..errors import ObjectStoreError
            raise ObjectStoreError(f"{self.uri}: {len(data)} bytes at byte {start} where "
                                   f"{end - start} were expected: the object changed since "
                                   "it was listed", uri=self.uri)
        return data

    @property
    def data(self):
        if self._data is None:
            self._data = self._read(0, self._size)
        return self._data

    @property
    def size(self):
        return self._size

    def view(self, start, end):
        end = self._size if end is None else min(end, self._size)
        if self._data is not None:
            return memoryview(self._data)[start:end]
        return memoryview(self._read(start, end)) if end > start else memoryview(b"")

    def batches(self, position=0, end=None, *, verify_crc=True, partial=None, **options):
        """As Segment.batches, fetching SCAN_WINDOW bytes at a time (more
        for a batch larger than that): a scan that stops early fetches
        little more than it read."""
        if partial is None:
            partial = "stop" if self.active else "error"
        end = self._size if end is None else min(end, self._size)
        window = SCAN_WINDOW
        while position < end:
            stop = min(end, position + window)
            view = self.view(position, stop)
            final = stop >= end
            after = position
            for batch in read_batches(view, verify_crc=verify_crc,
                                      partial=partial if final else "stop", source=self.uri,
                                      first_byte=position, **options):
                yield position + batch.position, batch
                after = position + batch.position + batch.size
            if final:
                return
            if after == position:
                window *= 2          # a batch larger than the window
            else:
                position, window = after, SCAN_WINDOW

    def release(self, start, end):
        pass

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None
        self._data = None


class RemotePartitionLog(PartitionLog):
    def __init__(self, store, directory, *, topic=None, partition=None, **options):
        local_dir = tempfile.mkdtemp(prefix="kcodec-log-")
        weakref.finalize(self, shutil.rmtree, local_dir, True)
        listing = _listing(store, directory)
        side = [name for name, is_dir, _, _ in listing
                if not is_dir and (SIDE_FILE.match(name) or SNAPSHOT_NAME.match(name))]

        def fetch(name):
            with store.errors(f"{directory}/{name}", "copying"):
                with store.fs.open_input_stream(f"{directory}/{name}") as source:
                    data = source.read()
            with open(os.path.join(local_dir, name), "wb") as f:
                f.write(data)

        # Many small objects: fetched side by side (each a request's latency).
        with ThreadPoolExecutor(SIDE_FILE_FETCHES) as pool:
            list(pool.map(fetch, side))
        parsed = parse_partition_dir(directory)
        # PartitionLog reads side files from its directory: give it the local
        # copy, then segments that read the remote .log files.
        super().__init__(local_dir, topic=parsed[0] if topic is None else topic,
                         partition=parsed[1] if partition is None else partition, **options)
        self.remote_directory = directory
        self.fs = store
        self.segments = [RemoteSegment(store, f"{directory}/{name}", local_dir, size, mtime)
                         for name, is_dir, size, mtime in listing
                         if not is_dir and SEGMENT_NAME.match(name)]
