"""How Kafka's Java tools write what kcodec dump reproduces: file names
(java.io.File) and strings decoded from invalid UTF-8 (new String)."""
import codecs
import os
import re

JAVA_REPLACE = "kcodec-java-replace"       # a codecs error handler


def _java_replace(error):
    """Replace invalid UTF-8 as Java's decoder does. Python flags each byte
    of a UTF-16 surrogate's three-byte encoding (ED A0..BF xx) on its own;
    Java takes the lead byte with its continuation bytes as one malformed
    sequence, one U+FFFD. Elsewhere both replace the same maximal subparts."""
    data, start = error.object, error.start
    end = error.end
    if data[start] == 0xED and start + 1 < len(data) and 0xA0 <= data[start + 1] <= 0xBF:
        end = start + 3 if start + 2 < len(data) and 0x80 <= data[start + 2] <= 0xBF else start + 2
    return "\ufffd", end


codecs.register_error(JAVA_REPLACE, _java_replace)


def java_path(path):
    """A path as java.io.File prints it: repeated and trailing slashes dropped."""
    path = re.sub("/+", "/", os.fspath(path))
    return path.rstrip("/") if len(path) > 1 else path


def java_absolute_path(path):
    """java.io.File.getAbsolutePath: java_path, after the working directory
    when relative; "." and ".." are kept (os.path.abspath resolves them)."""
    path = java_path(path)
    if path.startswith("/"):
        return path
    return os.path.join(os.getcwd(), path) if path else os.getcwd()
