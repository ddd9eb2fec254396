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
