import TrailbookClient

#if canImport(Glibc)
    import Glibc
#endif

// The thin client: the commands that only talk to the daemon run here; the others are handed to trailbook-jobsd.
exit(CLI.run(Array(CommandLine.arguments.dropFirst()), rawArguments: CLI.receivedArguments()))
