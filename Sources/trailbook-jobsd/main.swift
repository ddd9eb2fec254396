import TrailbookCLI

#if canImport(Glibc)
    import Glibc
#endif

// Every command, the daemon's among them.
exit(FullCLI.run(Array(CommandLine.arguments.dropFirst()), rawArguments: CLI.receivedArguments()))
