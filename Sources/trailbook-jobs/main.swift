import TrailbookCLI

#if canImport(Glibc)
    import Glibc
#endif

// The arguments' bytes as received, besides Swift's decoded (and repaired) strings: file names are bytes.
let rawArguments = (1..<Int(CommandLine.argc)).map { index in
    CommandLine.unsafeArgv[index].map { Array(UnsafeBufferPointer(start: $0, count: strlen($0))).map { UInt8(bitPattern: $0) } } ?? []
}
exit(CLI.run(Array(CommandLine.arguments.dropFirst()), rawArguments: rawArguments))
