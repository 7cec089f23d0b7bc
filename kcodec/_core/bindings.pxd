# C functions that the compression bindings' extension modules export (lz4,
# zstd, ISA-L's inflate and CRCs), found at import by crc.pyx and
# system_codecs.pyx: the very library builds the Python path runs.
from libc.stdint cimport uintptr_t
from posix.dlfcn cimport dlopen, dlsym, RTLD_NOW, RTLD_LOCAL


cdef inline dict exported(str module, tuple names):
    """name -> address of each of `names` in the extension module `module`
    (its shared library opened, the module not initialised), or None unless
    it exports them all."""
    import importlib.util
    cdef void* library
    cdef void* address
    try:
        spec = importlib.util.find_spec(module)
    except Exception:               # a parent package that fails to import: not there
        return None
    if spec is None or not spec.origin:
        return None
    library = dlopen(spec.origin.encode(), RTLD_NOW | RTLD_LOCAL)
    if library == NULL:
        return None
    found = {}
    for name in names:
        address = dlsym(library, name.encode())
        if address == NULL:
            return None
        found[name] = <uintptr_t>address
    return found
