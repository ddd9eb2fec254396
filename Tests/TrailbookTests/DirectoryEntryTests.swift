import Glibc
import Testing
import TrailbookLoop

/// `DirectoryEntry.name`: a `readdir` entry's name read in place, never past the entry (the daemon died with
/// SIGSEGV importing 10 000 photos when an entry lay at the end of glibc's directory buffer).
struct DirectoryEntryTests {
    /// An entry packed as getdents64 packs the last one of a buffer: `d_reclen` bytes, ending exactly where the
    /// mapped memory ends (the next page is PROT_NONE). Loading `entry.pointee.d_name` (256 bytes) faults here.
    @Test func anEntryEndingAtAnUnmappedPageIsReadWithinItself() throws {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let mapping = try #require(
            mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0).flatMap {
                $0 == MAP_FAILED ? nil : $0
            })
        defer { munmap(mapping, 2 * page) }
        #expect(mprotect(mapping + page, page, PROT_NONE) == 0)
        let name = Array("IMG_08722.jpg".utf8)
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        // d_reclen: header, name, NUL, rounded up to 8 (the kernel's alignment).
        let length = (nameOffset + name.count + 1 + 7) & ~7
        #expect(length < MemoryLayout<dirent>.size)
        let start = mapping + page - length
        memset(start, 0, length)
        let entry = start.bindMemory(to: dirent.self, capacity: 1)
        entry.pointee.d_reclen = UInt16(length)
        entry.pointee.d_type = UInt8(DT_REG)
        name.withUnsafeBytes { (start + nameOffset).copyMemory(from: $0.baseAddress!, byteCount: name.count) }
        #expect(DirectoryEntry.name(entry) == name)
    }

    /// Real entries: a 255-byte name (the longest), a name that is not UTF-8, and `.`/`..`, exactly as created.
    @Test func namesOfARealDirectoryAreTheirExactBytes() throws {
        var template = Array("/tmp/tbj-direntry-XXXXXX".utf8CString)
        let directory = try #require(mkdtemp(&template).map { String(cString: $0) })
        let created = [[UInt8](repeating: UInt8(ascii: "n"), count: 255), Array("caf".utf8) + [0xE9] + Array(".jpg".utf8), Array("a.jpg".utf8)]
        let paths = created.map { Array(directory.utf8) + [0x2F] + $0 + [0] }
        defer {
            for path in paths { path.withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { _ = unlink($0.baseAddress!) } } }
            rmdir(directory)
        }
        for path in paths {
            let fd = path.withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_CREAT | O_WRONLY, 0o600) } }
            #expect(fd >= 0)
            close(fd)
        }
        let stream = try #require(opendir(directory))
        var names: [[UInt8]] = []
        while let entry = readdir(stream) { names.append(DirectoryEntry.name(entry)) }
        closedir(stream)
        let byBytes: ([UInt8], [UInt8]) -> Bool = { $0.lexicographicallyPrecedes($1) }
        #expect(names.sorted(by: byBytes) == ([Array(".".utf8), Array("..".utf8)] + created).sorted(by: byBytes))
    }
}
