#pragma once
#include <sqlite3.h>

/// sqlite3_bind_text with SQLITE_TRANSIENT (a cast macro Swift cannot import): SQLite copies the bytes.
static inline int tb_sqlite3_bind_text(sqlite3_stmt *s, int i, const char *z, int n) {
    return sqlite3_bind_text(s, i, z, n, SQLITE_TRANSIENT);
}
/// sqlite3_bind_blob with SQLITE_TRANSIENT.
static inline int tb_sqlite3_bind_blob(sqlite3_stmt *s, int i, const void *z, int n) {
    return sqlite3_bind_blob(s, i, z, n, SQLITE_TRANSIENT);
}
