// ScanCache.swift — what a scan asks of a cache of what its files were (HeaderIndex keeps one on
// disk): a file unchanged since the last scan (same path and FileStamp: size, modification and
// change times, device and inode) is
// answered from the cache without being opened, so a warm scan costs a directory walk and a
// stat a file.
//
// The scan asks in ascending order of path bytes, so a cache kept sorted by path answers by one
// merge pass, whatever its size, in memory that does not grow with it.

/// What a file was when it was last read.
import Glibc

public enum ScanCacheKind: Equatable, Sendable {
    /// A photo Tessera reads, with its header.
    case photo(PhotoHeader)
    /// Not an image (a sidecar, notes): left out silently unless named like a photo.
    case notAnImage
    /// A video: counted, not read.
    case video
}

/// What a stat says of a file that changes when the file does, or when another file is meant.
/// The modification time alone is not enough: tools that edit a photo in place can keep it (an
/// orientation or a date edited with exiftool -P), and two folders' `in/p.jpg` may have the same
/// size and time. The change time cannot be set back, and device and inode tell files apart.
public struct FileStamp: Equatable, Sendable {
    public var fileBytes: Int64
    public var modifiedNanoseconds: Int64
    public var changedNanoseconds: Int64
    public var device: UInt64
    public var inode: UInt64

    public init(fileBytes: Int64, modifiedNanoseconds: Int64, changedNanoseconds: Int64 = 0, device: UInt64 = 0, inode: UInt64 = 0) {
        self.fileBytes = fileBytes
        self.modifiedNanoseconds = modifiedNanoseconds
        self.changedNanoseconds = changedNanoseconds
        self.device = device
        self.inode = inode
    }

    /// What `info` (a stat) says.
    init(_ info: stat) {
        self.init(fileBytes: Int64(info.st_size),
                  modifiedNanoseconds: Int64(info.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_mtim.tv_nsec),
                  changedNanoseconds: Int64(info.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_ctim.tv_nsec),
                  device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }
}

/// One file as a scan read it.
public struct ScanCacheEntry: Equatable, Sendable {
    public var path: PathBytes
    public var stamp: FileStamp
    public var kind: ScanCacheKind

    public var fileBytes: Int64 { stamp.fileBytes }
    public var modifiedNanoseconds: Int64 { stamp.modifiedNanoseconds }

    public init(path: PathBytes, stamp: FileStamp, kind: ScanCacheKind) {
        self.path = path
        self.stamp = stamp
        self.kind = kind
    }

    public init(path: PathBytes, fileBytes: Int64, modifiedNanoseconds: Int64, kind: ScanCacheKind) {
        self.init(path: path, stamp: FileStamp(fileBytes: fileBytes, modifiedNanoseconds: modifiedNanoseconds), kind: kind)
    }
}

/// One scan's pass over the cache: `lookup` is called with paths in ascending byte order (each
/// at most once), and answers only for a file whose stamp is unchanged.
public protocol ScanCacheReader: AnyObject {
    func lookup(_ path: PathBytes, stamp: FileStamp) throws(TesseraError) -> ScanCacheKind?
}

extension ScanCacheReader {
    /// A file known by size and modification time only (change time, device and inode 0).
    public func lookup(_ path: PathBytes, fileBytes: Int64, modifiedNanoseconds: Int64) throws(TesseraError) -> ScanCacheKind? {
        try lookup(path, stamp: FileStamp(fileBytes: fileBytes, modifiedNanoseconds: modifiedNanoseconds))
    }
}

/// A cache of what files were, kept between runs.
public protocol ScanCache: AnyObject, Sendable {
    /// A pass for one scan.
    func makeReader() throws(TesseraError) -> any ScanCacheReader
    /// Records what this scan read (a batch at a time, durably: a crash keeps every batch recorded).
    func record(_ entries: [ScanCacheEntry]) throws(TesseraError)
    /// The scan is over: fold what was recorded into the cache's sorted form.
    func finish() throws(TesseraError)
}

/// A file that lists photos, one path per line (or NUL-separated): `-` is standard input.
/// Read as a stream, never held whole, so a list of a million paths costs what one batch does.
public struct PhotoList: Equatable, Sendable {
    public var path: String
    public var nulSeparated: Bool

    public init(path: String, nulSeparated: Bool = false) {
        self.path = path
        self.nulSeparated = nulSeparated
    }
}
