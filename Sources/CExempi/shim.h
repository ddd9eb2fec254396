#pragma once
#include <exempi/xmp.h>
#include <exempi/xmpconsts.h>

/// syncfs(2) (glibc declares it only under _GNU_SOURCE): the sidecar writer flushes a batch's temporary files
/// with one call per file system before renaming them.
extern int syncfs(int fd);
