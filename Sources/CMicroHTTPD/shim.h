#pragma once
#include <stdarg.h>
#include <stdint.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <microhttpd.h>

/// Starts libmicrohttpd on an already bound and listening socket `listen_fd`, one thread per connection (an event
/// stream blocks its own thread only), at most `connection_limit` connections, and `memory_limit` bytes of buffers
/// per connection. `MHD_start_daemon` is variadic, which Swift cannot call, so the options are spelled out here.
/// Returns NULL if it could not start.
static inline struct MHD_Daemon *tb_mhd_start(int listen_fd, unsigned int connection_limit, size_t memory_limit,
                                              MHD_AccessHandlerCallback handler, void *handler_cls,
                                              MHD_RequestCompletedCallback completed, void *completed_cls) {
    return MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0,
                            NULL, NULL, handler, handler_cls,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_END);
}
