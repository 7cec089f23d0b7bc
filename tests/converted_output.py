"""What spark-convert committed, checked against its manifest: the output
holds exactly the Parquet files the manifest names (no in-progress, stale or
half-written file), with the sizes and rows it gives, the manifest itself
and _SUCCESS; on the local disk or on an object store."""
import json

import pyarrow.dataset as ds
import pyarrow.fs as pafs

from kcodec.spark.convert import MANIFEST, SUCCESS


def committed_output(out, filesystem=None):
    """(manifest, table of the files it names) of the output at `out`."""
    filesystem = filesystem or pafs.LocalFileSystem()
    out = str(out)
    listed = _listing(out, filesystem)
    manifest = _read_json(filesystem, f"{out}/{MANIFEST}")
    assert sorted(listed) == sorted([*_named(manifest), MANIFEST, SUCCESS])
    return manifest, _table(out, filesystem, listed, manifest)


def committed_runs(out, filesystem=None):
    """(manifest, table) of an output spark-convert added runs to with a
    checkpoint: it holds exactly the files its _manifest.json names (every
    run's, each also named by its run's _manifests/<n>.json), the run
    manifests, the empty file a run with no rows left, and _SUCCESS."""
    from kcodec.spark.convert import RUN_MANIFESTS
    filesystem = filesystem or pafs.LocalFileSystem()
    out = str(out)
    listed = _listing(out, filesystem)
    manifest = _read_json(filesystem, f"{out}/{MANIFEST}")
    runs = [r["run"] for r in manifest["runs"]]
    assert runs == list(range(len(runs)))
    for run in runs:
        own = _read_json(filesystem, f"{out}/{RUN_MANIFESTS}/{run}.json")
        assert [dict(f, run=run) for f in own["files"]] == [
            f for f in manifest["files"] if f["run"] == run]
    assert sorted(listed) == sorted([*_named(manifest), *manifest["empty"], MANIFEST, SUCCESS,
                                     *(f"{RUN_MANIFESTS}/{run}.json" for run in runs)])
    return manifest, _table(out, filesystem, listed, manifest)


def _listing(out, filesystem):
    """{path below `out`: size} of every file."""
    listed = {i.path[len(out) + 1:]: i.size for i in filesystem.get_file_info(
        pafs.FileSelector(out, recursive=True)) if i.type == pafs.FileType.File}
    # S3Proxy's filesystem backend lists the directories it keeps keys in as
    # objects too: what another key lies below is one of those.
    return {k: size for k, size in listed.items()
            if not any(other.startswith(k + "/") for other in listed)}


def _read_json(filesystem, path):
    with filesystem.open_input_stream(path) as f:
        return json.loads(f.read())


def _named(manifest):
    return {f["path"]: f["bytes"] for f in manifest["files"]}


def _table(out, filesystem, listed, manifest):
    """The rows of the files the manifest names, after checking their sizes
    and row counts against it."""
    named = _named(manifest)
    assert {path: listed[path] for path in named} == named
    table = ds.dataset([f"{out}/{path}" for path in sorted(named)], filesystem=filesystem,
                       format="parquet", partitioning="hive", partition_base_dir=out).to_table()
    assert table.num_rows == manifest["rows"] == sum(f["rows"] for f in manifest["files"])
    return table
