# What the column loops tell their callers, as named statuses: fill and grow
# (fill.pxi) return a FillStatus, scan (scan.pxi) a ScanStatus or one of the
# FillStatus errors, which are negative. records.pyx turns statuses into
# exceptions, in one place: raise_for_status these errors, raise_fault the
# parsers' fault codes (wire.pxd, records.pxd).

cdef enum FillStatus:
    FILL_DONE = 0               # every record of the block added
    FILL_GROW = 1               # the buffers must grow first (Out.needed, Out.most); fill resumes at Block.done
    FILL_FAULT = 2              # a record fails its checks (Block.fault says why); the block is retracted
    FILL_HEADERS_AHEAD = 3      # the headerless loop met a record with headers: the headered loop goes on
    FILL_TOO_LARGE = -2         # a binary column would pass Arrow's 2 GiB
    FILL_HEADER_CHANGED = -3    # a header changed in the input after its record was parsed
    FILL_NO_MEMORY = -4         # the buffers could not grow


cdef enum ScanStatus:
    SCAN_STOPPED = 0            # an entry the scan does not take is at *pos, for BatchReader
    SCAN_NEEDS_WINDOW = 10      # views: the plain batch at *pos needs a window into the input first
    SCAN_NEEDS_DECOMPRESS = 11  # the compressed batch at *pos is the caller's to decompress
