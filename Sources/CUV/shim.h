#pragma once
#include <uv.h>
#include <sys/socket.h>
#include <sys/types.h>

/// Layout of Linux's `struct ucred` (socket(7)); glibc hides it behind _GNU_SOURCE, which would clash with
/// Swift's Glibc module, so it is spelled out here.
struct tb_ucred { pid_t pid; uid_t uid; gid_t gid; };

/// The uid of the process at the other end of a connected Unix socket (SO_PEERCRED), or -1 on error.
static inline long tb_peer_uid(int fd) {
    struct tb_ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    return (long)cred.uid;
}

#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>

/// Asks the kernel to send SIGKILL to the calling process when its parent dies (prctl(2) PR_SET_PDEATHSIG; prctl is
/// variadic, so Swift cannot call it). Returns 0, or -1 if the parent is already gone (reparented) or prctl failed.
static inline int tb_die_with_parent(pid_t expected_parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return -1;
    return getppid() == expected_parent ? 0 : -1;
}

#include <sys/syscall.h>

/// copy_file_range(2): copies up to `count` bytes from `in_fd` at `*in_offset` to `out_fd` at `*out_offset`
/// inside the kernel (page cache to page cache, or a reflink where the file system shares extents), advancing
/// both offsets. glibc declares it only under _GNU_SOURCE (see above), so it is reached through syscall(2).
/// Returns the bytes copied (0 at the source's end), or -1 with errno set.
static inline long tb_copy_file_range(int in_fd, long long *in_offset, int out_fd, long long *out_offset,
                                      unsigned long count) {
    return syscall(SYS_copy_file_range, in_fd, in_offset, out_fd, out_offset, count, 0U);
}

/// syncfs(2): flushes every dirty page and inode of the file system that holds `fd` (glibc declares it only under
/// _GNU_SOURCE, so it is reached through syscall(2)). Returns 0, or -1 with errno set (Linux 5.8 and later report
/// a writeback error of any file on it since `fd` was opened).
static inline int tb_syncfs(int fd) {
    return (int)syscall(SYS_syncfs, fd);
}

/// lseek(2) with SEEK_HOLE (Linux's value, 4: glibc names it only under _GNU_SOURCE): the offset of the first hole at
/// or after `offset`, which is the file's length when it has none (or its file system does not track holes), or -1
/// with errno set.
static inline long long tb_seek_hole(int fd, long long offset) {
    return (long long)lseek(fd, (off_t)offset, 4);
}
