"""Every code block of README.md and docs/**/*.md runs as written.

The pages are found beside this file (tests/../), so the examples run against
the installed kcodec, as users run them. Each page gets a fresh temporary
directory; its blocks run there in page order:

- ```python blocks: each in a fresh interpreter (so a block that leans on a
  name from an earlier one fails: every block must stand alone), with the
  directory as its working directory. Files a block writes stay there for the
  blocks after it on the same page.
- ```console blocks: each line starting with "$ " is run with bash (kcodec
  and python are the installed ones); it must exit 0, and the lines after it,
  up to the next command, are its expected standard output ("..." matches
  anything, whitespace is normalised, as in doctest).
- Other blocks (```bash for setup steps, ```text, ...) are not run.

A block that needs more than kcodec and its test extras' usual peers says so
in an HTML comment on the line before it:

    <!-- docs-test: needs spark -->           PySpark and Java
    <!-- docs-test: needs confluent_kafka -->  an importable module (any name)

Without that, the block skips on a developer's machine and fails under CI
(tests/needs.py), where everything is installed.
"""
import doctest
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from needs import unavailable

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
MARKER = re.compile(r"<!--\s*docs-test:\s*needs\s+(?P<what>[\w.]+)\s*-->\s*$")
RUN = {"python", "console"}
TIMEOUT = 600
CHECKER = doctest.OutputChecker()
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def blocks(page):
    """(line number, language, body, what it needs or None) of each block to run."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        if match["lang"] not in RUN:
            continue
        line = text.count("\n", 0, match.start()) + 1
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        found.append((line, match["lang"], match["body"], marker["what"] if marker else None))
    return found


CASES = [pytest.param(page, *block, id=f"{page.relative_to(REPO)}:{block[0]}")
         for page in PAGES for block in blocks(page)]


def test_the_pages_have_examples():
    names = {case.values[0].name for case in CASES}
    assert {"README.md", "records.md", "logs.md", "spark.md", "protocol.md", "cli.md"} <= names


def test_readme_is_short_and_its_links_resolve():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (REPO / target).exists(), f"README links to a missing {target}"


def check_needs(what):
    if what is None:
        return
    if what == "spark":
        if importlib.util.find_spec("pyspark") is None:
            unavailable("the example needs PySpark (pip install 'kcodec[spark]')")
        if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
            unavailable("the example needs Java 17+ for Spark")
    elif importlib.util.find_spec(what) is None:
        unavailable(f"the example needs the module {what}")


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory):
    """A working directory per page, shared by the page's blocks."""
    made = {}

    def workdir(page):
        if page not in made:
            made[page] = tmp_path_factory.mktemp(page.stem)
        return made[page]
    return workdir


def environment():
    env = dict(os.environ)
    # The interpreter running the tests, its kcodec script, and for Spark its
    # Python workers: the installed kcodec, not a source tree.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env.pop("PYTHONPATH", None)
    return env


def run_python(body, cwd, name):
    script = cwd.parent / f"{cwd.name}-{name}.py"      # outside cwd: cwd holds only what blocks write
    script.write_text(body)
    done = subprocess.run([sys.executable, str(script)], cwd=cwd, env=environment(),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, (
        f"exit status {done.returncode}\n--- stdout\n{done.stdout[-4000:]}\n"
        f"--- stderr\n{done.stderr[-8000:]}")


def commands(body):
    """(command, expected output) of each "$ " line of a console block."""
    found = []
    for line in body.splitlines():
        if line.startswith("$ "):
            found.append([line[2:], []])
        elif found:
            found[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"console block starts with output, not a command: {line!r}")
    return [(command, "\n".join(lines).strip() + "\n") for command, lines in found]


def run_console(body, cwd):
    for command, want in commands(body):
        done = subprocess.run(["bash", "-c", command], cwd=cwd, env=environment(),
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert done.returncode == 0, (
            f"$ {command}\nexit status {done.returncode}\n--- stdout\n{done.stdout[-4000:]}\n"
            f"--- stderr\n{done.stderr[-4000:]}")
        if want.strip():
            got = done.stdout.strip() + "\n"
            assert CHECKER.check_output(want, got, OPTIONS), (
                f"$ {command}\n--- expected\n{want}--- got\n{got}--- stderr\n{done.stderr[-2000:]}")


@pytest.mark.parametrize("page, line, lang, body, needs", CASES)
def test_example_runs(workdirs, page, line, lang, body, needs):
    check_needs(needs)
    cwd = workdirs(page)
    if lang == "python":
        run_python(body, cwd, f"line{line}")
    else:
        run_console(body, cwd)
