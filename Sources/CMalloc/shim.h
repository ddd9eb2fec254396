#pragma once
// glibc's allocator controls (mallopt(3), M_MMAP_THRESHOLD), which the Glibc module does not bring in. Part of
// libc itself: nothing to link.
#include <malloc.h>
