// ChildProcess lives in TestSupport (shared with the PostgreSQL harness); re-exported so every end-to-end test file
// sees it as before, without an import of its own.
@_exported import TestSupport
