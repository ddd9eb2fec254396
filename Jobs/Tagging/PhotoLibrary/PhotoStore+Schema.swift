import TrailbookLoop
import TrailbookSQLite
import TrailbookPaths

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// The photo store's schema: its migrations, and the tag merge migration 7 runs.
extension PhotoStore {
    /// The schema migrations, in order (index `i` moves version `i` to `i + 1`).
    public static let migrations: [Migration] = [
        """
        CREATE TABLE photos (
            id INTEGER PRIMARY KEY,
            stable_id TEXT NOT NULL UNIQUE,
            path TEXT NOT NULL UNIQUE,
            bytes INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            inode INTEGER NOT NULL,
            width INTEGER, height INTEGER, orientation INTEGER,
            taken_at TEXT, camera_make TEXT, camera_model TEXT,
            gps_lat REAL, gps_lon REAL,
            phash INTEGER
        );
        CREATE TABLE tags (
            photo_id INTEGER NOT NULL REFERENCES photos(id) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            PRIMARY KEY (photo_id, tag)
        ) WITHOUT ROWID;
        CREATE INDEX tags_by_tag ON tags(tag, photo_id);
        """,
        // 2: no query looks photos up by tag (`photos list --tag` filters pages it reads anyway), and the index
        // cost every tag insert a second B-tree write: the bulk tag job's main cost after SQLite's own.
        "DROP INDEX IF EXISTS tags_by_tag;",
        // 3: the foreign key on tags.photo_id cost every tag insert a probe of `photos` that repeats what the
        // insert just established: every statement that writes a tag row takes its photo ID from `photos` in the
        // same transaction (`changeTag`, `addTag`, `replaceTags` all select it). A trigger keeps what the key
        // gave besides: deleting a photo deletes its tags. SQLite cannot drop a constraint, so the table is
        // rebuilt (https://www.sqlite.org/lang_altertable.html#otheralter).
        """
        CREATE TABLE tags_v3 (
            photo_id INTEGER NOT NULL,
            tag TEXT NOT NULL,
            PRIMARY KEY (photo_id, tag)
        ) WITHOUT ROWID;
        INSERT INTO tags_v3 (photo_id, tag) SELECT photo_id, tag FROM tags;
        DROP TABLE tags;
        ALTER TABLE tags_v3 RENAME TO tags;
        CREATE TRIGGER photos_delete_tags AFTER DELETE ON photos BEGIN
            DELETE FROM tags WHERE photo_id = old.id;
        END;
        """,
        // 4: tags as a bitmap index (see the type's documentation). Each old row sets one bit; rows of one word
        // and tag are distinct powers of two, so their sum is their bitwise OR (and cannot overflow: bit 63 is
        // the one negative term).
        """
        CREATE TABLE tag_names (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE
        );
        CREATE TABLE tag_words (
            word INTEGER NOT NULL,
            tag_id INTEGER NOT NULL,
            bits INTEGER NOT NULL CHECK (bits <> 0),
            PRIMARY KEY (word, tag_id)
        ) WITHOUT ROWID;
        INSERT INTO tag_names (name) SELECT DISTINCT tag FROM tags ORDER BY tag;
        INSERT INTO tag_words (word, tag_id, bits)
            SELECT t.photo_id >> 6, n.id, sum(1 << (t.photo_id & 63))
            FROM tags AS t JOIN tag_names AS n ON n.name = t.tag
            GROUP BY t.photo_id >> 6, n.id;
        DROP TRIGGER photos_delete_tags;
        DROP TABLE tags;
        CREATE VIEW tags (photo_id, tag) AS
            SELECT p.id, n.name
            FROM tag_words AS w
            JOIN tag_names AS n ON n.id = w.tag_id
            JOIN photos AS p ON p.id BETWEEN w.word * 64 AND w.word * 64 + 63 AND (w.bits >> (p.id & 63)) & 1;
        CREATE TRIGGER photos_delete_tags AFTER DELETE ON photos BEGIN
            DELETE FROM tag_words WHERE word = old.id >> 6 AND bits = 1 << (old.id & 63);
            UPDATE tag_words SET bits = bits & ~(1 << (old.id & 63))
                WHERE word = old.id >> 6 AND (bits >> (old.id & 63)) & 1;
        END;
        """,
        // 5: the view also names each photo by its stable ID, the ID every command takes.
        """
        DROP VIEW tags;
        CREATE VIEW tags (photo_id, stable_id, tag) AS
            SELECT p.id, p.stable_id, n.name
            FROM tag_words AS w
            JOIN tag_names AS n ON n.id = w.tag_id
            JOIN photos AS p ON p.id BETWEEN w.word * 64 AND w.word * 64 + 63 AND (w.bits >> (p.id & 63)) & 1;
        """,
        // 6: what reading a photo noticed (a GPS position without its reference, corrupt data decoded anyway).
        "ALTER TABLE photos ADD COLUMN warnings TEXT;",
        // 7: tag names in NFC; names that normalize alike are merged (SQLite compares text byte by byte, so it
        // cannot do this itself).
        .code(mergeTagTwins),
        // 8: where each photo was uploaded (`PhotoStore+Uploads.swift`): one row per photo and destination,
        // written when the upload job finished that photo's file. The destination is the upload job's normalised
        // identity, never a credential.
        """
        CREATE TABLE photo_uploads (
            stable_id TEXT NOT NULL,
            destination TEXT NOT NULL,
            job TEXT NOT NULL,
            uploaded_at_ms INTEGER NOT NULL,
            location BLOB NOT NULL,
            bytes INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            PRIMARY KEY (stable_id, destination)
        ) WITHOUT ROWID;
        """,
    ]

    /// Renames every tag to its NFC spelling (`TagName.nfc`); tags whose names become equal are merged into the
    /// one with the lowest number, their bitmap words ORed together, so a photo that had any twin has the tag
    /// once. Runs inside migration 7's transaction.
    /// - Throws: `SQLiteError`.
    static func mergeTagTwins(_ database: Database) throws {
        var groups: [String: [(id: Int64, name: String)]] = [:]
        for row in try database.query("SELECT id, name FROM tag_names ORDER BY id") {
            guard let id = row.int(0), let name = row.text(1) else { continue }
            groups[TagName.nfc(name), default: []].append((id, name))
        }
        for (normal, twins) in groups where twins.count > 1 || !twins[0].name.utf8.elementsEqual(normal.utf8) {
            let keep = twins[0].id
            for twin in twins.dropFirst() {
                try database.query(
                    """
                    INSERT INTO tag_words (word, tag_id, bits) SELECT word, ?1, bits FROM tag_words WHERE tag_id = ?2
                        ON CONFLICT (word, tag_id) DO UPDATE SET bits = bits | excluded.bits
                    """, [.integer(keep), .integer(twin.id)])
                try database.query("DELETE FROM tag_words WHERE tag_id = ?", [.integer(twin.id)])
                try database.query("DELETE FROM tag_names WHERE id = ?", [.integer(twin.id)])
            }
            try database.query("UPDATE tag_names SET name = ?1 WHERE id = ?2", [.text(normal), .integer(keep)])
        }
    }
}
