// RenderPart.swift — the two seams through which a render split across processes (Shards/)
// reaches the core: a part of the render (which stripes this process makes, and the one sink
// they go to), and a cell source the cell cache asks before decoding. The renderer knows
// nothing else about how the part was chosen or where it is written.

/// Cells a render may be handed instead of decoding them (another process decoded them).
protocol CellSource: Sendable {
    /// Fills `bytes` with photo `photo`'s cell, from the source when it has it, else by
    /// `decode` (and may keep the result for others). Returns the decode's notes and whether
    /// the cell came from the source.
    func fetch(_ photo: Int, into bytes: UnsafeMutableRawBufferPointer,
               decode: () throws(TesseraError) -> DecodeNotes) throws(TesseraError) -> (notes: DecodeNotes, read: Bool)
}

/// What a process renders of a planned render, when not all of it.
protocol RenderPart: Sendable {
    /// The stripes this process renders.
    var stripes: Range<Int> { get }
    /// Folders it writes in, besides the outputs': a render removes dead renders' temporaries there first.
    var directories: [String] { get }
    /// The one sink its stripes go to, in place of the request's outputs.
    func makeSink(plan: RenderPlan, request: RenderRequest) throws(TesseraError) -> StripeSink
    /// Cells to ask before decoding, or nil to decode every cell.
    func makeCellSource(plan: RenderPlan, layout: CellLayout, photoCount: Int) throws(TesseraError) -> (any CellSource)?
    /// Its share of the viewer's previews (PhotoPreviews.share).
    var previewShare: (index: Int, count: Int) { get }
}

/// A sink that writes the viewer's previews (a pyramid's, or a part's share of them): the
/// renderer, which has the decoder, hands them over before the render.
protocol PreviewSink: AnyObject {
    var previews: PhotoPreviews? { get set }
}

/// A part's sink that carries the render's manifest to the join (which writes it): set by the
/// renderer before the stripes run, with what tells it, once they are done, which photos were
/// drawn as placeholders or only in part.
protocol ManifestSink: AnyObject {
    var manifest: (output: ManifestOutput, drawn: () -> RenderSummary)? { get set }
}

/// Chooses a render's part once it is planned.
protocol RenderPartChooser: Sendable {
    /// Adjusts the request before it is validated and planned (a part may need one encoder).
    func adjust(_ request: inout RenderRequest) throws(TesseraError)
    /// The part of the planned render this process makes.
    func part(of request: RenderRequest, plan: RenderPlan) throws(TesseraError) -> any RenderPart
}
