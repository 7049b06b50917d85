// ShardPart.swift — a shard as the render core sees it, through its two seams (RenderPart.swift):
// the band's stripes with the part file's sink (ShardSink), and the shard folder's shared cells
// as the cell cache's source (SharedCells).

extension ShardTarget: RenderPartChooser {
    /// A sharded render always writes the parallel encoder's restart-marker stripes:
    /// `settings.encoder` nil or `.parallel` (the joined JPEG is that of a single-process render
    /// with `.parallel`).
    func adjust(_ request: inout RenderRequest) throws(TesseraError) {
        guard request.jpegPath != nil else { return }
        guard request.settings.encoder != .serial else { throw .shardedSerialEncoder }
        request.settings.encoder = .parallel
    }

    /// This shard's band of the planned render (ShardPlan.swift), and the render's fingerprint.
    func part(of request: RenderRequest, plan: RenderPlan) throws(TesseraError) -> any RenderPart {
        let band = try ShardBand.make(plan: plan, shard: shard)
        return ShardPart(target: self, band: band,
                         fingerprint: ShardBand.fingerprint(request: request, plan: plan, shards: shard.count,
                                                            bandUnitRows: band.bandUnitRows))
    }
}

/// One shard's part of a render: its band, written into its part file in the shard folder.
struct ShardPart: RenderPart {
    let target: ShardTarget
    let band: ShardBand
    let fingerprint: String

    var stripes: Range<Int> { band.renderedStripes }
    var previewShare: (index: Int, count: Int) { (target.shard.number - 1, target.shard.count) }
    var directories: [String] { [target.directory] }

    func makeSink(plan: RenderPlan, request: RenderRequest) throws(TesseraError) -> StripeSink {
        try ShardSink(target: target, band: band, plan: plan, request: request, fingerprint: fingerprint)
    }

    func makeCellSource(plan: RenderPlan, layout: CellLayout, photoCount: Int) throws(TesseraError) -> (any CellSource)? {
        try SharedCells(shardDirectory: target.directory, fingerprint: fingerprint, layout: layout, photoCount: photoCount,
                        plan: plan, shards: target.shard.count)
    }
}

extension StripeRenderer {
    /// A render of `request`, or with `shard` only that shard's band into its part file in the
    /// shard folder; `tessera join` makes the outputs from the parts.
    public convenience init(request: RenderRequest, cancellation: RenderCancellation? = nil,
                            shard: ShardTarget? = nil) throws(TesseraError) {
        try self.init(request: request, cancellation: cancellation, partChooser: shard)
    }

    /// The shard this process renders, when it renders one.
    public var shard: ShardTarget? { (part as? ShardPart)?.target }
    /// The band of the shard this process renders.
    public var band: ShardBand? { (part as? ShardPart)?.band }
}
