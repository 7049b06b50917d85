// FeatureIndexBridge.swift — TEMPORARY: the journaled index's calls, over the old index, until
// it lands.
extension FeatureIndex {
    func lookupRows(_ photos: PhotoTable, found: (Int, [Float]) throws(TesseraError) -> Void) throws(TesseraError) -> [Int32] {
        var missing: [Int32] = []
        for (row, photo) in photos.enumerated() {
            if let features = lookup(photo.path, decoded: FeatureIndex.decodeKey(photo.header)) {
                try found(row, features)
            } else {
                missing.append(Int32(row))
            }
        }
        return missing
    }

    func appendBatch(_ entries: [(photo: Photo, features: [Float])]) throws(TesseraError) {
        for entry in entries { store(entry.photo.path, decoded: FeatureIndex.decodeKey(entry.photo.header), features: entry.features) }
    }

    func compactJournal() throws(TesseraError) { try save() }
}

