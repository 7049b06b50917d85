// CollageRunner.swift — what `tessera collage` does: scan the photos, lay them out keeping their
// shapes (CollageLayout), then render as a grid does (Runner.runLayout).
import Tessera

extension Runner {
    public func collage(_ collage: CollageOptions) -> ExitCode {
        runLayout(collage.render, collage: true) { library, options throws(TesseraError) in
            try collageLayout(collage, options: options, photos: library.photos)
        }
    }

    /// The collage's layout: every photo once in the order asked, its shape from its header;
    /// refused before anything is drawn when the picture is larger than the outputs hold.
    func collageLayout(_ collage: CollageOptions, options: GridOptions, photos: PhotoTable) throws(TesseraError) -> CellLayout {
        // A preview alone shapes the default collage as a JPEG would hold it (what the render it
        // previews will be), but a larger picture asked for is only refused by what a pyramid
        // holds: its preview is drawn small, and the full picture is never written.
        let defaultLimit = options.plannedOutputs.contains { $0.kind == .jpeg } ? jpegMaxDimension : RenderPlan.maxDeepZoomSide
        let sideLimit = options.outputs.isEmpty ? RenderPlan.maxDeepZoomSide : defaultLimit
        var aspects: [Double] = []
        aspects.reserveCapacity(photos.count)
        for photo in photos { aspects.append(CollageLayout.aspect(of: photo.header)) }
        let shape = CollageCommand.shape(collage, aspects: aspects, sideLimit: defaultLimit)
        if case .columns(let count) = shape.style {
            // Columns past the photo count would stay empty.
            if count > photos.count {
                throw .invalidSettings("--columns \(count) is more columns than \(photos.count == 1 ? "one photo" : "the \(photos.count) photos") can fill: give --columns \(photos.count) or fewer")
            }
            if shape.width < count + collage.gap * (count + 1) {
                throw .invalidSettings("a collage \(shape.width) px wide has no room for \(count) columns with gaps of \(collage.gap) px: give a larger --width or fewer --columns")
            }
        }
        let sequence = CollageLayout.sequence(photoCount: photos.count, order: options.order, photos: photos)
        if let line = Report.undatedNote(options.order, photos: photos) { console.result(line) }
        // (The height is known only once the photos are laid out: the width alone is checked here.)
        if shape.width > sideLimit {
            throw .invalidSettings(sideLimit == jpegMaxDimension
                ? "--width \(shape.width) is wider than a JPEG can be (\(formatCount(jpegMaxDimension)) px): give --width \(jpegMaxDimension) or less, or write only pyramids (--dzi, --szi, --tiff), which may be up to \(formatCount(RenderPlan.maxDeepZoomSide)) px"
                : "--width \(shape.width) is wider than any picture tessera writes (\(formatCount(sideLimit)) px): give --width \(sideLimit) or less")
        }
        let layout: CellLayout
        do throws(TesseraError) {
            layout = try CollageLayout.make(aspects: aspects, sequence: sequence, width: shape.width, style: shape.style, gap: collage.gap,
                                            heightLimit: sideLimit)
        } catch {
            throw Self.tooTall(error, style: shape.style, sideLimit: sideLimit, photoCount: photos.count, gap: collage.gap) { style in
                (try? CollageLayout.make(aspects: aspects, sequence: sequence, width: shape.width, style: style, gap: collage.gap,
                                         heightLimit: sideLimit)) != nil
            }
        }
        if let warning = Self.misshapen(layout, aspects: aspects) { console.warning(warning) }
        return layout
    }

    /// A collage taller than its outputs hold, said with what makes it fit: shorter rows (the
    /// height falls with them) or more columns, or pyramids alone, which hold a larger picture.
    /// (Fifty thousand photos at the default row height made a JPEG 68,622 px tall, refused
    /// with no way out named.) Any other error as it is. The row height or column count named
    /// is the one that fits, found by laying the photos out again (`fits`): the height grows
    /// with the square of the row height (taller rows, and more of them), so scaling it by the
    /// proportion named rows a quarter lower than needed.
    static func tooTall(_ error: TesseraError, style: CollageStyle, sideLimit: Int, photoCount: Int, gap: Int,
                        fits: (CollageStyle) -> Bool) -> TesseraError {
        guard case .outputTooLarge(let width, let height, let limit) = error, height > limit else { return error }
        var fixes: [String] = []
        switch style {
        case .rows(let rowHeight):
            // The tallest rows that fit: a binary search below the rows asked for.
            var low = 0, high = rowHeight
            while high - low > 1 {
                let middle = (low + high) / 2
                if fits(.rows(rowHeight: middle)) { low = middle } else { high = middle }
            }
            if low >= 1 { fixes.append("give --row-height \(low) or less") }
        case .columns(let count):
            // The fewest columns that fit, of the counts a collage takes: at most one a photo,
            // and each at least a pixel wide between the gaps (more, and the layout has no room).
            let most = min(photoCount, (width - gap) / (gap + 1))
            var low = count, high = most
            if high > low, fits(.columns(count: high)) {
                while high - low > 1 {
                    let middle = (low + high) / 2
                    if fits(.columns(count: middle)) { high = middle } else { low = middle }
                }
                fixes.append("give --columns \(high) or more")
            }
        }
        if sideLimit == jpegMaxDimension {
            fixes.append("write only pyramids (--dzi, --szi, --tiff), which may be up to \(formatCount(RenderPlan.maxDeepZoomSide)) px")
        }
        fixes.append("use fewer photos")
        return .invalidSettings("a collage of these photos \(formatCount(width)) px wide would be \(formatCount(height)) px tall, "
                                + "more than \(sideLimit == jpegMaxDimension ? "a JPEG" : "any picture tessera writes") can be "
                                + "(\(formatCount(limit)) px): " + fixes.joined(separator: ", or "))
    }

    /// A warning when some photos are drawn too small to keep their shape within a pixel (a
    /// collage a few pixels wide: a square drawn 2 x 1), or nil.
    static func misshapen(_ layout: CellLayout, aspects: [Double]) -> String? {
        guard let framed = layout.framed else { return nil }
        var count = 0
        var smallest: CellFrame?
        for frame in framed.frames where frame.photo >= 0 {
            let aspect = aspects[Int(frame.photo)], width = Double(frame.width), height = Double(frame.height)
            guard abs(width - height * aspect) > 1 && abs(height - width / aspect) > 1 else { continue }
            count += 1
            if smallest.map({ Int(frame.width) * Int(frame.height) < Int($0.width) * Int($0.height) }) ?? true { smallest = frame }
        }
        guard count > 0, let smallest else { return nil }
        return "\(formatCount(count)) of \(formatCount(framed.frames.count)) photo(s) are drawn too small to keep their shape within a pixel "
            + "(one is \(smallest.width) x \(smallest.height) px): give a larger --width, --row-height or fewer --columns"
    }
}
