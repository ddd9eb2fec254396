// The protocol's types (JSON, the job model, timestamps, byte paths) are part of the engine's API: job kinds and the
// CLI see them through `import TrailbookEngine`, as before the thin client needed them on their own.
@_exported import TrailbookProtocol
