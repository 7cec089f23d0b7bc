# C functions that the compression bindings' extension modules export (lz4,
# zstd, ISA-L's inflate and CRCs), found at import by crc.pyx and
# system_codecs.pyx: the very library builds the Python path runs.


cdef inline dict exported(str module, tuple names):
    """name -> address of each of `names` in the extension module `module`
    (its shared library opened, the module not initialised), or None unless
    it exports them all. Opened through ctypes rather than dlopen called
    here: glibc 2.34 moved dlopen and dlsym into libc under a new symbol
    version, and a call of our own would make the wheel manylinux_2_34 at
    the least (auditwheel)."""
    import ctypes
    import importlib.util
    import os
    try:
        spec = importlib.util.find_spec(module)
    except Exception:               # a parent package that fails to import: not there
        return None
    if spec is None or not spec.origin:
        return None
    try:
        library = ctypes.CDLL(spec.origin, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError:                 # not a shared library
        return None
    found = {}
    for name in names:
        try:
            found[name] = ctypes.cast(getattr(library, name), ctypes.c_void_p).value
        except AttributeError:
            return None
    return found
