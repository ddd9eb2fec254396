#pragma once
#include <curl/curl.h>

// Typed wrappers for libcurl's variadic calls, which Swift cannot call (and which GCC's headers wrap in macros).
// One wrapper per argument kind. Wrappers that take a callback name the callback type in their signature, so Swift
// can pass a non-capturing closure literal as the `@convention(c)` function.

static inline CURLcode tb_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode tb_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode tb_easy_setopt_str(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode tb_easy_setopt_ptr(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode tb_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode tb_easy_setopt_read_cb(CURL *h, curl_read_callback cb) {
    return curl_easy_setopt(h, CURLOPT_READFUNCTION, cb);
}
static inline CURLcode tb_easy_setopt_write_cb(CURL *h, curl_write_callback cb) {
    return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cb);
}
static inline CURLcode tb_easy_setopt_header_cb(CURL *h, curl_write_callback cb) {
    return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, cb);
}
static inline CURLcode tb_easy_setopt_seek_cb(CURL *h, curl_seek_callback cb) {
    return curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, cb);
}
static inline CURLcode tb_easy_setopt_xferinfo_cb(CURL *h, curl_xferinfo_callback cb) {
    return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, cb);
}

static inline CURLcode tb_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode tb_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode tb_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode tb_easy_getinfo_str(CURL *h, CURLINFO i, char **v) { return curl_easy_getinfo(h, i, v); }

static inline CURLMcode tb_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode tb_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode tb_multi_setopt_socket_cb(CURLM *m, curl_socket_callback cb) {
    return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, cb);
}
static inline CURLMcode tb_multi_setopt_timer_cb(CURLM *m, curl_multi_timer_callback cb) {
    return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, cb);
}

/// `CURLMsg.data.result`, for readers that prefer not to touch the union.
static inline CURLcode tb_msg_result(CURLMsg *msg) { return msg->data.result; }
