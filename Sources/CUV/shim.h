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
