"""kcodec's Spark commands print no Spark or JVM warnings unless asked
(--verbose): each run here starts its own JVM, as a user's command does."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kcodec
from kcodec.log import write_log
from kcodec.spark.session import QUIET_LOG4J, jvm_notes_left_out, quiet_java_options
from needs import require_module, unavailable

require_module("pyspark")


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("kafka-logs")
    write_log(str(root / "orders-0"),
              kcodec.encode([(b"k%d" % i, b"value %d" % i) for i in range(300)],
                            compression="zstd"))
    return root


def spark_convert(logs, out, *flags):
    """`kcodec spark-convert` in a process of its own (its own JVM), run
    where the installed kcodec is the one imported."""
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        unavailable("Spark needs java (apt-get install openjdk-17-jre-headless)")
    env = dict(os.environ)
    env.pop("SPARK_CONF_DIR", None)          # Spark's own logging defaults when verbose
    package_root = str(Path(kcodec.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "kcodec.cli", "spark-convert", str(logs), "--out", str(out),
         "--master", "local[1]", *flags],
        capture_output=True, text=True, cwd=out.parent, env=env, timeout=600)


def test_spark_convert_prints_no_warnings(logs, tmp_path):
    done = spark_convert(logs, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "300 rows from 1 partition(s)" in done.stdout
    warnings = [line for line in done.stderr.splitlines() if "WARN" in line]
    assert warnings == []
    assert "log4j" not in done.stderr and "log level" not in done.stderr


def test_spark_convert_verbose_shows_sparks_log(logs, tmp_path):
    done = spark_convert(logs, tmp_path / "out", "--verbose")
    assert done.returncode == 0, done.stderr
    assert "300 rows from 1 partition(s)" in done.stdout
    assert "WARN" in done.stderr
    assert "Using Spark's default log4j profile" in done.stderr


def test_quiet_java_options_add_the_log4j2_file_once():
    assert QUIET_LOG4J.is_file()
    options = quiet_java_options("-Dderby.system.home=/tmp/x")
    assert options == f"-Dlog4j2.configurationFile={QUIET_LOG4J.resolve().as_uri()} " \
                      "-Dderby.system.home=/tmp/x"
    assert quiet_java_options(options) == options
    assert quiet_java_options("-Dlog4j2.configurationFile=mine.xml") == \
        "-Dlog4j2.configurationFile=mine.xml"


def test_a_child_started_in_the_context_has_its_jvm_notes_left_out(capfd):
    # The child's stderr is the pipe: its JVM-style notes are dropped, every
    # other line reaches this process's stderr; afterwards fd 2 is as before.
    script = ("import sys; sys.stderr.write('WARNING: Using incubator modules: x\\n"
              "an error line\\nWARNING: another note\\nlast line, no newline')")
    with jvm_notes_left_out():
        child = subprocess.Popen([sys.executable, "-c", script])
    assert child.wait(timeout=60) == 0
    os.write(2, b"after\n")
    err = ""
    for _ in range(200):                 # the thread passes lines on as they come
        err += capfd.readouterr().err
        if "last line" in err:
            break
        time.sleep(0.05)
    assert "WARNING" not in err
    assert "an error line\n" in err and "last line, no newline" in err and "after\n" in err
