// PhotoTable.swift — the photos of a library, in path order, as every later phase reads them
// (the render's cells, the mosaic's analysis and matching, the manifest): by row number.
//
// A table is a random-access collection of `Photo`, so a phase reads one photo, or a run of
// them, when it needs it. It is held in memory when made from an array (tests, small
// libraries, the library's API).
public final class PhotoTable: RandomAccessCollection, ExpressibleByArrayLiteral, @unchecked Sendable {
    public typealias Element = Photo
    public typealias Index = Int

    private let held: [Photo]

    /// The photos, in the order given (a scan gives them sorted by path bytes).
    public init(_ photos: [Photo]) {
        held = photos
    }

    public convenience init(arrayLiteral photos: Photo...) {
        self.init(photos)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { held.count }
    public var count: Int { held.count }

    public subscript(position: Int) -> Photo { held[position] }

    /// Bytes of the table kept in the process's memory (what the plan counts).
    public var residentBytes: Int { held.count * (MemoryLayout<Photo>.stride + 64) }
}
