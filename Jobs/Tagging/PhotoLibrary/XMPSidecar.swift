import CExempi
import TrailbookLoop
import Synchronization
import TrailbookPaths

#if canImport(Glibc)
    import Glibc
#endif

/// Where a photo's XMP sidecar lives, by the convention of the app that reads it.
public enum XMPSidecarNaming: String, Hashable, Sendable, Codable, CaseIterable {
    /// `IMG_0001.jpg.xmp`: the photo's whole name plus `.xmp` (darktable, digiKam). The default.
    case darktable
    /// `IMG_0001.xmp`: the photo's name with its extension replaced (Lightroom, Bridge).
    case lightroom

    /// The sidecar's path for the photo at `photoPath`, as bytes: the photo's exact name (UTF-8 or not) with
    /// `.xmp` appended, or put in place of its extension.
    public func sidecarPath(for photoPath: BytePath) -> BytePath {
        switch self {
        case .darktable:
            return photoPath + ".xmp"
        case .lightroom:
            let bytes = photoPath.bytes
            let slash = bytes.lastIndex(of: UInt8(ascii: "/")).map { $0 + 1 } ?? 0
            // A name whose only dot leads it (`.hidden`) has no extension to replace.
            if let dot = bytes[slash...].lastIndex(of: UInt8(ascii: ".")), dot > slash {
                return BytePath(bytes: bytes[..<dot]) + ".xmp"
            }
            return photoPath + ".xmp"
        }
    }

    /// The sidecar's path for the photo at `photoPath` (text); see `sidecarPath(for:)` on bytes.
    public func sidecarPath(for photoPath: String) -> String {
        sidecarPath(for: BytePath(photoPath)).description
    }
}

/// One photo's keyword change to carry into its sidecar: keywords to hold (set semantics: each once) and keywords
/// to take off. Applying the same change twice leaves the same sidecar, which keeps a job exactly-once when a crash
/// makes it redo a batch.
public struct XMPSidecarChange: Hashable, Sendable, Codable {
    /// The photo's path, its exact bytes (the sidecar is found from it by the naming convention).
    public var path: BytePath
    /// Keywords the sidecar must hold, in every keyword property (`XMPKeywordProperty.all`).
    public var add: [String]
    /// Keywords the sidecar must no longer hold.
    public var remove: [String]

    /// A change of the sidecar of the photo at `path`.
    public init(path: BytePath, add: [String], remove: [String]) {
        self.path = path
        self.add = add
        self.remove = remove
    }

    /// A change of the sidecar of the photo at `path` (text).
    public init(path: String, add: [String], remove: [String]) {
        self.init(path: BytePath(path), add: add, remove: remove)
    }
}

/// What became of one sidecar.
public enum XMPSidecarOutcome: Hashable, Sendable {
    /// The sidecar was created or rewritten with the change.
    case written
    /// The sidecar already held the change; it was left untouched.
    case unchanged
    /// The sidecar could not be read or written; nothing was changed. `code`: `xmp_unreadable` (an existing
    /// sidecar that does not parse as XMP: it is never overwritten), `xmp_write_failed` (a read-only or full
    /// directory, …) or `xmp_shared_sidecar` (Lightroom naming gives another photo in the folder the same sidecar:
    /// `XMPSidecarSharing`); `message` says which file and why.
    case failed(code: String, message: String)
}

/// Keywords in XMP: reading them from a sidecar or a photo's embedded packet, and merging a change into a sidecar
/// without touching anything else in it (other apps' properties, ratings, labels, namespaces and keywords).
///
/// `dc:subject` (Dublin Core, an unordered bag) holds every keyword as written; each is also written to the
/// properties darktable, digiKam and Lightroom prefer (`XMPKeywordProperty`): `lr:hierarchicalSubject` (`year|2015`,
/// `family`), `digiKam:TagsList` and `MicrosoftPhoto:LastKeywordXMP` (`year/2015`, `family`), and taken off all
/// four together. Parsing and serializing are exempi's (Adobe's XMP toolkit); the files are
/// untrusted only when read in a worker (import), and a sidecar that does not parse is never overwritten.
public enum XMPKeywords {
    /// Dublin Core's namespace, home of `subject`.
    static let dublinCoreNamespace = XMPKeywordProperty.subject.namespace
    /// The largest sidecar (or embedded packet) read, in bytes; bigger ones are `xmp_unreadable`.
    public static let maxPacketBytes = 16 << 20

    /// The toolkit is initialized once per process (Swift globals are initialized lazily and exactly once).
    private static let initialized: Bool = xmp_init()

    /// The Lightroom hierarchy of a namespaced keyword (`year:2015` → `year|2015`, `place:Lisbon` →
    /// `place|Lisbon`); `nil` for a bare keyword (no `:`, or one at either end).
    public static func hierarchy(of keyword: String) -> String? {
        let form = XMPKeywordProperty.hierarchicalSubject.form(of: keyword)
        return form == keyword ? nil : form
    }

    /// The `dc:subject` keywords of an XMP packet, in order, without repeats; `nil` when it does not parse.
    public static func subjects(inPacket packet: [UInt8]) -> [String]? {
        guard initialized, let xmp = packet.withUnsafeBufferPointer({ buffer in
            buffer.baseAddress.flatMap { base in
                base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { xmp_new($0, buffer.count) }
            }
        }) else { return nil }
        defer { xmp_free(xmp) }
        var seen = Set<String>()
        return items(of: xmp, dublinCoreNamespace, "subject").filter { seen.insert($0).inserted }
    }

    /// The embedded XMP packet of a photo file (a JPEG's APP1 `http://ns.adobe.com/xap/1.0/` segment, the XMP item
    /// of a HEIF, …): the bytes from `<x:xmpmeta` to its `</x:xmpmeta>`, found by content so it works for any
    /// container that stores the packet as plain UTF-8 (all of them do). `nil` when there is none.
    public static func embeddedPacket(in bytes: [UInt8]) -> [UInt8]? {
        guard let start = find(Array("<x:xmpmeta".utf8), in: bytes, from: 0),
            let end = find(Array("</x:xmpmeta>".utf8), in: bytes, from: start)
        else { return nil }
        return Array(bytes[start..<(end + "</x:xmpmeta>".utf8.count)])
    }

    /// The keywords a photo already carries: its embedded packet's `dc:subject`, then each sidecar's (both
    /// namings), without repeats. Unreadable sidecars and packets add nothing (they are someone else's to fix).
    /// A Lightroom-named sidecar that another photo in the folder shares (`XMPSidecarSharing`: `IMG_1.xmp` of
    /// `IMG_1.JPG` and `IMG_1.HEIC`) is not read: which photo its keywords belong to cannot be told, and giving
    /// them to both would merge two photos' keywords. `warnings` gets a line saying so, starting
    /// `xmp_shared_sidecar:`.
    public static func keywords(ofPhoto path: BytePath, bytes: [UInt8], warnings: inout [String]) -> [String] {
        var found: [String] = embeddedPacket(in: bytes).flatMap { subjects(inPacket: $0) } ?? []
        var sidecars: [BytePath] = []
        for naming in XMPSidecarNaming.allCases where !sidecars.contains(naming.sidecarPath(for: path)) {
            let sidecar = naming.sidecarPath(for: path)
            let sharing = XMPSidecarSharing.others(sharingSidecarOf: path, naming: naming)
            if !sharing.isEmpty {
                if case .success(.some) = readFile(sidecar) {
                    let message = XMPSidecarSharing.message(path, sidecar: sidecar, others: sharing)
                    warnings.append(XMPSidecarSharing.code + ": " + message)
                }
                continue
            }
            sidecars.append(sidecar)
        }
        for sidecar in sidecars {
            guard case .success(let packet?) = readFile(sidecar), let words = subjects(inPacket: packet) else { continue }
            found += words
        }
        var seen = Set<String>()
        return found.filter { seen.insert($0).inserted }
    }

    /// `keywords(ofPhoto:bytes:warnings:)` without the warnings.
    public static func keywords(ofPhoto path: BytePath, bytes: [UInt8]) -> [String] {
        var warnings: [String] = []
        return keywords(ofPhoto: path, bytes: bytes, warnings: &warnings)
    }

    /// The `dc:subject` keywords of the sidecar at `sidecarPath`; `[]` when it does not exist, `nil` when it cannot
    /// be read or parsed.
    public static func subjects(ofSidecar sidecarPath: BytePath) -> [String]? {
        switch readFile(sidecarPath) {
        case .success(nil): return []
        case .success(let packet?): return subjects(inPacket: packet)
        case .failure: return nil
        }
    }

    /// The `dc:subject` keywords of the sidecar at `sidecarPath` (text); see `subjects(ofSidecar:)` on bytes.
    public static func subjects(ofSidecar sidecarPath: String) -> [String]? { subjects(ofSidecar: BytePath(sidecarPath)) }

    /// Merges `change` into a sidecar's packet (`nil`: no sidecar yet) and returns the new packet, or `nil` when
    /// the sidecar already holds the change. Only the keyword properties (`XMPKeywordProperty.all`) are touched:
    /// the change's keywords in each, and the `dc:subject` keywords a hierarchical property lacks are added to it;
    /// everything else in the packet (ratings, labels, history, other apps' namespaces) is kept as parsed.
    ///
    /// - Throws: `XMPSidecarOutcome.failed` `xmp_unreadable` when `existing` does not parse.
    static func merged(_ existing: [UInt8]?, _ change: XMPSidecarChange, sidecarPath: BytePath) throws(XMPSidecarFailure) -> [UInt8]? {
        guard initialized else { throw XMPSidecarFailure(code: "xmp_write_failed", message: "the XMP toolkit did not start") }
        let parsed: OpaquePointer?
        if let existing {
            parsed = existing.withUnsafeBufferPointer { buffer in
                buffer.baseAddress.flatMap { base in
                    base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { xmp_new($0, buffer.count) }
                }
            }
        } else {
            parsed = xmp_new_empty()
        }
        guard let xmp = parsed else {
            throw XMPSidecarFailure(
                code: "xmp_unreadable",
                message: "\(sidecarPath) is not valid XMP (error \(xmp_get_error())); left as it is, fix or remove it")
        }
        defer { xmp_free(xmp) }
        _ = registeredNamespaces
        var changed = false
        for property in XMPKeywordProperty.all {
            let holding = change.add.map(property.form(of:))
            let without = change.remove.map(property.form(of:)).filter { !holding.contains($0) }
            changed = setBag(xmp, property, holding: holding, without: without) || changed
        }
        // Keywords the sidecar held before in `dc:subject` alone (written by an older version, or by an app that
        // writes only that) join the hierarchical properties as soon as those exist: an app that prefers one of
        // them would otherwise stop showing them (darktable reads `dc:subject` only when there is no
        // `lr:hierarchicalSubject`).
        // A keyword another hierarchical property shows as a level of a hierarchy (Lightroom's `year|2024` for
        // its `dc:subject` levels `year` and `2024`) joins as that hierarchy, not as a flat keyword.
        let subjects = items(of: xmp, XMPKeywordProperty.subject)
        let paths = XMPKeywordProperty.hierarchical.flatMap { other in
            items(of: xmp, other).map { $0.split(separator: other.separator ?? "|").map(String.init) }
        }
        for property in XMPKeywordProperty.hierarchical {
            let present = items(of: xmp, property)
            guard !present.isEmpty, let separator = property.separator else { continue }
            let missing = subjects.filter { !property.shows($0, in: present) }.map { keyword in
                let levels = property.form(of: keyword).split(separator: separator).map(String.init)
                let path = paths.first { $0 == levels } ?? paths.first { $0.contains(keyword) } ?? levels
                return path.joined(separator: String(separator))
            }
            changed = setBag(xmp, property, holding: missing, without: []) || changed
        }
        guard changed else { return nil }
        guard let text = xmp_string_new() else {
            throw XMPSidecarFailure(code: "xmp_write_failed", message: "out of memory serializing \(sidecarPath)")
        }
        defer { xmp_string_free(text) }
        guard xmp_serialize(xmp, text, UInt32(XMP_SERIAL_OMITPACKETWRAPPER), 0), let cText = xmp_string_cstr(text) else {
            throw XMPSidecarFailure(code: "xmp_write_failed", message: "cannot serialize \(sidecarPath) (error \(xmp_get_error()))")
        }
        return Array(UnsafeBufferPointer(start: UnsafeRawPointer(cText).assumingMemoryBound(to: UInt8.self), count: xmp_string_len(text)))
    }

    /// The keyword properties' namespaces (not all among exempi's preregistered ones in every version), registered
    /// once.
    private static let registeredNamespaces: Bool = {
        guard let prefix = xmp_string_new() else { return false }
        defer { xmp_string_free(prefix) }
        return XMPKeywordProperty.all.allSatisfy { xmp_register_namespace($0.namespace, $0.prefix, prefix) }
    }()

    /// Makes the array `property` hold each of `holding` exactly once and none of `without` (creating it when it
    /// must hold something, deleting it when it ends up empty and this call emptied it). Other items stay in
    /// place. Returns whether anything changed.
    private static func setBag(
        _ xmp: OpaquePointer, _ property: XMPKeywordProperty, holding: [String], without: [String]
    ) -> Bool {
        let (namespace, name) = (property.namespace, property.name)
        let present = items(of: xmp, property)
        var changed = false
        let remove = Set(without).subtracting(holding)
        var kept = Set<String>()
        // Highest index first, so deleting does not move the items still to visit. XMP array indices start at 1.
        for index in stride(from: present.count, through: 1, by: -1) {
            let item = present[index - 1]
            let drop = remove.contains(item) || (holding.contains(item) && present[..<(index - 1)].contains(item))
            if drop {
                xmp_delete_property(xmp, namespace, "\(name)[\(index)]")
                changed = true
            } else {
                kept.insert(item)
            }
        }
        var seen = Set<String>()
        for keyword in holding where !kept.contains(keyword) && seen.insert(keyword).inserted {
            xmp_append_array_item(xmp, namespace, name, property.arrayOptions, keyword, 0)
            changed = true
        }
        if changed, items(of: xmp, property).isEmpty { xmp_delete_property(xmp, namespace, name) }
        return changed
    }

    /// The items of the array `property`, in order; `[]` when absent.
    private static func items(of xmp: OpaquePointer, _ property: XMPKeywordProperty) -> [String] {
        items(of: xmp, property.namespace, property.name)
    }

    /// The items of the array `namespace:name`, in order; `[]` when absent.
    private static func items(of xmp: OpaquePointer, _ namespace: String, _ name: String) -> [String] {
        guard let value = xmp_string_new() else { return [] }
        defer { xmp_string_free(value) }
        var result: [String] = []
        var index: Int32 = 1
        while xmp_get_array_item(xmp, namespace, name, index, value, nil), let text = xmp_string_cstr(value) {
            result.append(String(cString: text))
            index += 1
        }
        return result
    }

    /// The bytes of the file at `path`: `nil` when it does not exist; at most `maxPacketBytes`.
    static func readFile(_ path: BytePath) -> Result<[UInt8]?, XMPSidecarFailure> {
        let fd = path.withCString { open($0, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
        guard fd >= 0 else {
            if errno == ENOENT { return .success(nil) }
            return .failure(XMPSidecarFailure(code: "xmp_unreadable", message: "cannot open \(path): \(String(cString: strerror(errno)))"))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            return .failure(XMPSidecarFailure(code: "xmp_unreadable", message: "\(path) is not a regular file"))
        }
        guard info.st_size <= maxPacketBytes else {
            return .failure(XMPSidecarFailure(code: "xmp_unreadable", message: "\(path) is over \(maxPacketBytes >> 20) MiB; not XMP"))
        }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var filled = 0
        while filled < bytes.count {
            let got = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if got < 0, errno == EINTR { continue }
            guard got >= 0 else {
                return .failure(XMPSidecarFailure(code: "xmp_unreadable", message: "cannot read \(path): \(String(cString: strerror(errno)))"))
            }
            if got == 0 { break }
            filled += got
        }
        return .success(Array(bytes[..<filled]))
    }

    /// The first index of `needle` in `haystack` at or after `from`.
    static func find(_ needle: [UInt8], in haystack: [UInt8], from: Int) -> Int? {
        guard let first = needle.first, haystack.count - from >= needle.count else { return nil }
        return haystack.withUnsafeBufferPointer { hay -> Int? in
            var index = from
            let last = hay.count - needle.count
            while index <= last {
                guard let hit = memchr(hay.baseAddress! + index, Int32(first), last - index + 1) else { return nil }
                index = UnsafeRawPointer(hit) - UnsafeRawPointer(hay.baseAddress!)
                if memcmp(hay.baseAddress! + index, needle, needle.count) == 0 { return index }
                index += 1
            }
            return nil
        }
    }
}

/// Why one sidecar was not changed: a stable code (`xmp_unreadable`, `xmp_write_failed`) and a message.
public struct XMPSidecarFailure: Error, Hashable, Sendable {
    /// The stable code.
    public var code: String
    /// What failed and what to do, in words.
    public var message: String
}

/// Writes a batch of sidecar changes, each atomically: the new packet goes to a hidden temporary file in the
/// sidecar's directory (`.IMG_0001.jpg.xmp.trailbook.tmp`), the batch's temporary files are flushed to disk, each
/// is renamed over its sidecar, and each directory touched is fsynced. So a sidecar is always either the old one or
/// the new one, whole, and after a crash a sidecar that was renamed is on disk. A temporary file left by a crash
/// has the same name the redo of its batch writes and renames, so none stays behind.
///
/// Batches run one at a time in a process (a lock): two jobs changing the same sidecar at once would otherwise
/// each read it before the other wrote, and one change would be lost.
///
/// The flush is one `syncfs(2)` per file system for the whole batch rather than an `fsync(2)` per file: the
/// same guarantee (every temporary file's data is durable before any rename), at the cost of one flush instead of
/// thousands (an fsync costs about 5 ms on the build machines' ext4, which would bound a batch at 200 sidecars a
/// second). A failed flush (a write-back error) fails every sidecar of the batch on that file system and renames
/// none of them; a failed folder fsync fails the sidecars renamed in that folder.
///
/// The file-system calls of a batch run on `threads` threads: they mostly wait for the device, not the CPU. A
/// rename over an existing sidecar frees the old file's blocks, which on a file system mounted with `discard`
/// (the build machines' ext4) waits for the device while holding the directory's lock: measured, 2 000 renames
/// over existing files in one folder took 1.3–6.5 s one after another and 0.2–0.3 s on 8 threads each holding the
/// old file open across its rename (so the blocks are freed at its `close`, outside the directory's lock). The
/// XMP toolkit's parse and merge run one at a time (`toolkit`). Blocking file I/O: call it on the thread pool.
public enum XMPSidecarWriter {
    /// Threads per batch for the file-system calls.
    static let threads = 8

    /// Applies `changes` (sidecar naming `naming`) and returns one outcome per change, in order.
    public static func apply(_ changes: [XMPSidecarChange], naming: XMPSidecarNaming) -> [XMPSidecarOutcome] {
        oneAtATime.withLock { _ in applyAlone(changes, naming: naming) }
    }

    private static let oneAtATime = Mutex(())
    /// exempi calls of the batch's threads, one at a time (its error state is per process in older versions).
    private static let toolkit = Mutex(())

    /// One staged sidecar: its temporary file is written and waits for the flush and the rename.
    private struct Staged: Sendable {
        var temporary: BytePath
        var sidecar: BytePath
        var existed: Bool
    }

    private static func applyAlone(_ changes: [XMPSidecarChange], naming: XMPSidecarNaming) -> [XMPSidecarOutcome] {
        let outcomes = Slots<XMPSidecarOutcome>(repeating: .unchanged, count: changes.count)
        let staged = Slots<Staged?>(repeating: nil, count: changes.count)
        concurrently(changes.count, threads: threads) { index in
            let sidecar = naming.sidecarPath(for: changes[index].path)
            do throws(XMPSidecarFailure) {
                // A photo name of 252–255 bytes has a darktable sidecar name no file system takes (NAME_MAX).
                if sidecar.lastComponent.bytes.count > 255 {
                    throw XMPSidecarFailure(
                        code: "xmp_write_failed",
                        message: "cannot write \(sidecar): \(String(cString: strerror(ENAMETOOLONG))) (\(sidecar.lastComponent.bytes.count) "
                            + "bytes, over the 255 of a file name); use --xmp-naming lightroom, or a shorter photo name")
                }
                let sharing = XMPSidecarSharing.others(sharingSidecarOf: changes[index].path, naming: naming)
                if !sharing.isEmpty {
                    throw XMPSidecarSharing.failure(changes[index].path, sidecar: sidecar, others: sharing)
                }
                let existing = try XMPKeywords.readFile(sidecar).get()
                let merged = try toolkit.withLock { _ throws(XMPSidecarFailure) in
                    try XMPKeywords.merged(existing, changes[index], sidecarPath: sidecar)
                }
                guard let packet = merged else { return }
                let temporary = temporaryPath(for: sidecar)
                try writeTemporary(packet, to: temporary, sidecar: sidecar, mode: existing == nil ? 0o644 : nil)
                staged[index] = Staged(temporary: temporary, sidecar: sidecar, existed: existing != nil)
            } catch {
                outcomes[index] = .failed(code: error.code, message: error.message)
            }
        }
        let written = (0..<changes.count).compactMap { index in staged[index].map { (index, $0) } }
        guard !written.isEmpty else { return outcomes.values }
        // Flush every temporary file's data: one syncfs per file system, found through each directory touched.
        var directories: [BytePath] = []
        var flushFailure: [UInt64: String] = [:]
        var deviceOf: [BytePath: UInt64] = [:]
        var flushed = Set<UInt64>()
        for (_, entry) in written {
            let directory = directoryOf(entry.sidecar)
            if deviceOf[directory] != nil { continue }
            directories.append(directory)
            var info = stat()
            guard directory.withCString({ stat($0, &info) }) == 0 else {
                deviceOf[directory] = UInt64.max
                flushFailure[UInt64.max] = "cannot flush \(directory): \(String(cString: strerror(errno)))"
                continue
            }
            let device = UInt64(info.st_dev)
            deviceOf[directory] = device
            guard flushed.insert(device).inserted else { continue }
            let fd = directory.withCString { open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
            if fd < 0 || syncfs(fd) != 0 {
                flushFailure[device] = "cannot flush the new sidecars in \(directory) to disk: \(String(cString: strerror(errno)))"
            }
            if fd >= 0 { close(fd) }
        }
        let (devices, failures, folders) = (deviceOf, flushFailure, directories)
        concurrently(written.count, threads: threads) { item in
            let (index, entry) = written[item]
            if let failure = failures[devices[directoryOf(entry.sidecar)] ?? UInt64.max] {
                entry.temporary.withCString { _ = unlink($0) }
                outcomes[index] = .failed(code: "xmp_write_failed", message: failure)
                return
            }
            // Held open across the rename, so the old file is freed at this close, outside the directory's lock.
            let old = entry.existed ? entry.sidecar.withCString { open($0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) } : -1
            defer { if old >= 0 { close(old) } }
            if entry.temporary.withCString({ temporary in entry.sidecar.withCString { rename(temporary, $0) } }) == 0 {
                outcomes[index] = .written
            } else {
                let reason = String(cString: strerror(errno))
                entry.temporary.withCString { _ = unlink($0) }
                outcomes[index] = .failed(code: "xmp_write_failed", message: "cannot replace \(entry.sidecar): \(reason)")
            }
        }
        // Make the renames durable; a folder whose fsync fails holds sidecars that may not survive a crash.
        let directoryFailure = Slots<String?>(repeating: nil, count: folders.count)
        concurrently(folders.count, threads: threads) { item in
            let fd = folders[item].withCString { open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
            if fd < 0 || fsync(fd) != 0 {
                directoryFailure[item] = "cannot flush the folder \(folders[item]) to disk: \(String(cString: strerror(errno)))"
            }
            if fd >= 0 { close(fd) }
        }
        for (item, directory) in folders.enumerated() {
            guard let failure = directoryFailure[item] else { continue }
            for (index, entry) in written where directoryOf(entry.sidecar) == directory && outcomes[index] == .written {
                outcomes[index] = .failed(code: "xmp_write_failed", message: failure)
            }
        }
        return outcomes.values
    }

    /// Runs `body` for each index in `0..<count` on up to `threads` threads (the caller's among them) and returns
    /// when all have run.
    static func concurrently(_ count: Int, threads: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let work = ParallelWork(count: count, body: body)
        var started: [pthread_t] = []
        for _ in 0..<max(0, min(threads, count) - 1) {
            var thread = pthread_t()
            let context = Unmanaged.passRetained(work).toOpaque()
            let result = pthread_create(&thread, nil, { context in
                Unmanaged<ParallelWork>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            }, context)
            if result == 0 {
                started.append(thread)
            } else {
                Unmanaged<ParallelWork>.fromOpaque(context).release()  // fewer threads; the caller's still runs all
            }
        }
        work.run()
        for thread in started { pthread_join(thread, nil) }
    }

    /// `DIR/.NAME.trailbook.tmp`: hidden (no photo app and no import takes it for a sidecar) and in the same
    /// directory, so the rename is atomic. When that name would pass `NAME_MAX` (255 bytes: a sidecar named
    /// after a photo of 240 bytes or more), `DIR/.trailbook-HASH.tmp` instead, HASH the first 32 hex digits of
    /// the SHA-256 of the sidecar's name: still the same name on every redo, so a crash leaves nothing behind.
    static func temporaryPath(for sidecar: BytePath) -> BytePath {
        var name = BytePath(bytes: [UInt8(ascii: ".")] + sidecar.lastComponent.bytes) + ".trailbook.tmp"
        if name.bytes.count > 255 {
            name = BytePath(".trailbook-" + Digest.hex(Digest.hash(.sha256, sidecar.lastComponent.bytes)).prefix(32) + ".tmp")
        }
        guard let slash = sidecar.bytes.lastIndex(of: UInt8(ascii: "/")) else { return name }
        return BytePath(bytes: sidecar.bytes[...slash] + name.bytes)
    }

    static func directoryOf(_ path: BytePath) -> BytePath {
        guard let slash = path.bytes.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        return slash == 0 ? "/" : BytePath(bytes: path.bytes[..<slash])
    }

    /// Writes `bytes` to a fresh `temporary` (mode `mode`, or the sidecar's own when it exists).
    static func writeTemporary(_ bytes: [UInt8], to temporary: BytePath, sidecar: BytePath, mode: mode_t?) throws(XMPSidecarFailure) {
        var permissions: mode_t = 0o644
        if let mode {
            permissions = mode
        } else {
            var info = stat()
            if sidecar.withCString({ stat($0, &info) }) == 0 { permissions = info.st_mode & 0o7777 }
        }
        let fd = temporary.withCString { open($0, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, permissions) }
        guard fd >= 0 else {
            throw XMPSidecarFailure(
                code: "xmp_write_failed",
                message: "cannot write \(sidecar): \(String(cString: strerror(errno))) (in \(directoryOf(sidecar)))")
        }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                let reason = String(cString: strerror(errno))
                close(fd)
                temporary.withCString { _ = unlink($0) }
                throw XMPSidecarFailure(code: "xmp_write_failed", message: "cannot write \(sidecar): \(reason)")
            }
            written += count
        }
        close(fd)
    }
}

/// The indices of one `XMPSidecarWriter.concurrently` call, handed out one at a time to its threads.
private final class ParallelWork: Sendable {
    let next = Atomic<Int>(0)
    let count: Int
    let body: @Sendable (Int) -> Void

    init(count: Int, body: @escaping @Sendable (Int) -> Void) {
        self.count = count
        self.body = body
    }

    func run() {
        while true {
            let index = next.wrappingAdd(1, ordering: .relaxed).oldValue
            guard index < count else { return }
            body(index)
        }
    }
}

/// Results written by several threads, each slot by one thread at a time, read after they have all joined.
private final class Slots<Value: Sendable>: Sendable {
    private let storage: Mutex<[Value]>

    init(repeating value: Value, count: Int) {
        storage = Mutex([Value](repeating: value, count: count))
    }

    subscript(index: Int) -> Value {
        get { storage.withLock { $0[index] } }
        set { storage.withLock { $0[index] = newValue } }
    }

    var values: [Value] { storage.withLock { $0 } }
}
