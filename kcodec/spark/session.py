"""The local SparkSession of kcodec's Spark commands (spark-convert, demo):
quiet unless asked.

Started here without `verbose`, the driver JVM logs errors only, through
log4j2-quiet.properties beside this module (Spark's own defaults log
warnings: a loopback hostname, no native Hadoop library, ...), and the notes
the JVM itself prints to stderr as it starts ("WARNING: Using incubator
modules: jdk.incubator.vector") are left out: the JVM's stderr is a pipe
whose lines this process passes on to its own stderr, all but those."""
import contextlib
import os
import sys
import threading
from pathlib import Path

QUIET_LOG4J = Path(__file__).with_name("log4j2-quiet.properties")
LOG4J_PROPERTY = "log4j2.configurationFile"
# What the JVM prints to stderr itself, outside any logger: "WARNING: Using
# incubator modules: ...", and on newer JDKs the blocks on restricted or
# deprecated methods, every line of which starts so.
JVM_NOTE = b"WARNING: "
# Off by default in Spark; while off, no filter reaches a Python data source.
FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def local_session(master="local[*]", app_name="kcodec spark-convert", verbose=False, **conf):
    """A SparkSession whose Python workers run this interpreter (so they
    import the same kcodec), or the one `spark.pyspark.python` names, with
    the Spark settings in `conf`. One that starts a JVM logs only errors and
    leaves out the JVM's startup notes, unless `verbose`; a session already
    running is returned as it is. Filter pushdown to Python data sources is
    on unless `conf` or the session says otherwise
    (:func:`enable_filter_pushdown`)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    settings = {"spark.ui.showConsoleProgress": "false", **conf}
    if "spark.pyspark.python" in settings:
        # Read from the environment only, by a driver spark-submit did not
        # start (spark-submit turns the setting into this variable).
        os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    quiet = not verbose and getattr(SparkContext, "_gateway", None) is None
    if quiet:
        settings["spark.driver.extraJavaOptions"] = quiet_java_options(
            settings.get("spark.driver.extraJavaOptions", ""))
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    if not quiet:
        return enable_filter_pushdown(builder.getOrCreate())
    with jvm_notes_left_out():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return enable_filter_pushdown(spark)


def enable_filter_pushdown(spark):
    """Let Spark push filters down to Python data sources (the
    ``kafka-log`` source narrows its read with them), unless the session
    sets ``spark.sql.python.filterPushdown.enabled`` already.

    Args:
        spark: A ``SparkSession``.

    Returns:
        The same session.
    """
    if spark.conf.get(FILTER_PUSHDOWN_CONF, None) is None:
        spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    return spark


def quiet_java_options(options):
    """The driver's Java options with the quiet log4j2 configuration, unless
    they name a configuration of their own. As a file URI: no quoting in
    Spark's option string whatever the path holds."""
    if LOG4J_PROPERTY in options:
        return options
    return f"-D{LOG4J_PROPERTY}={QUIET_LOG4J.resolve().as_uri()} {options}".strip()


@contextlib.contextmanager
def jvm_notes_left_out():
    """While in this context, file descriptor 2 is a pipe: child processes
    started meanwhile (the JVM) keep it as their stderr, and a thread passes
    each line on to the process's stderr unless it is a JVM note. This
    process's own stderr is back as it was on leaving; the thread ends when
    the last child holding the pipe does."""
    sys.stderr.flush()
    try:
        real_stderr = os.dup(2)
    except OSError:             # no stderr at all: nothing to keep clean
        yield
        return
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    threading.Thread(target=_pass_on, args=(read_end, real_stderr), daemon=True,
                     name="kcodec-jvm-stderr").start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(real_stderr, 2)


def _pass_on(read_end, real_stderr):
    out = open(real_stderr, "wb", buffering=0)
    with open(read_end, "rb", buffering=0) as pipe:
        for line in _lines(pipe):
            if out is None or line.startswith(JVM_NOTE):
                continue
            try:
                out.write(line)
            except OSError:     # stderr gone: read on all the same, or the JVM
                out.close()     # would block on a full pipe
                out = None
    if out is not None:
        out.close()


def _lines(pipe):
    pending = b""
    while True:
        chunk = pipe.read(65536)
        if not chunk:
            break
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line + b"\n"
    if pending:
        yield pending
