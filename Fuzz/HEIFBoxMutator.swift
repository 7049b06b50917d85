// HEIFBoxMutator.swift — mutations of a HEIF seed that keep its box structure, so that they reach
// past libheif's parser into the item boxes the decode is sized from (tessera_heif.c): an 'ispe'
// that lies, a grid whose references all point at one tile or whose canvas is huge, a box whose
// size field is wrong, a box deleted or repeated, 'pitm' naming another item, parameter sets
// with edited bytes. Byte-level mutations (main.swift's `mutate`) rarely leave a HEIF parseable.
//
// Single-threaded, like the rest of the fuzzer: it draws from main.swift's `below`.
import Tessera

/// A box found in the seed: where its header starts, its payload, and its type.
struct FoundBox {
    let start: Int
    let payload: Int
    let end: Int
    let type: String
}

/// The boxes of `bytes` in [from, to), and those inside the containers a HEIF keeps its items in.
func heifBoxes(_ bytes: [UInt8], from: Int = 0, to: Int? = nil, depth: Int = 0) -> [FoundBox] {
    let end = to ?? bytes.count
    var found: [FoundBox] = []
    var at = from
    while at + 8 <= end && found.count < 4096 {
        let size = Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
        guard size >= 8, size <= end - at else { break }
        let type = String(decoding: bytes[(at + 4)..<(at + 8)], as: UTF8.self)
        found.append(FoundBox(start: at, payload: at + 8, end: at + size, type: type))
        // Containers, and where their children start (full boxes have 4 bytes of version and flags).
        let children: Int? = switch type {
        case "meta", "iref": at + 12
        case "iinf": at + 12 + (at + 8 < end && bytes[at + 8] == 0 ? 2 : 4)
        case "iprp", "ipco", "dinf", "moov", "trak": at + 8
        default: nil
        }
        if let children, depth < 4 { found += heifBoxes(bytes, from: children, to: at + size, depth: depth + 1) }
        at += size
    }
    return found
}

private func put32(_ bytes: inout [UInt8], _ at: Int, _ value: UInt32) {
    guard at >= 0, at + 4 <= bytes.count else { return }
    bytes[at] = UInt8(value >> 24); bytes[at + 1] = UInt8(value >> 16 & 0xFF)
    bytes[at + 2] = UInt8(value >> 8 & 0xFF); bytes[at + 3] = UInt8(value & 0xFF)
}

private func put16(_ bytes: inout [UInt8], _ at: Int, _ value: UInt16) {
    guard at >= 0, at + 2 <= bytes.count else { return }
    bytes[at] = UInt8(value >> 8); bytes[at + 1] = UInt8(value & 0xFF)
}

/// Sizes a hostile header would claim.
private func interestingSize() -> UInt32 {
    let values: [UInt32] = [0, 1, 2, 64, 75, 100, 511, 512, 513, 4000, 20480, 32767, 32768, 65535, 1 << 20, 0x7FFF_FFFF, 0xFFFF_FFFF]
    return below(4) == 0 ? UInt32(truncatingIfNeeded: random.next()) : values[below(values.count)]
}

/// A few box-aware mutations of a HEIF seed (one of `seeds` whose first box is 'ftyp'); nil when
/// there is none.
func mutateHEIFBoxes(_ seeds: [[UInt8]]) -> [UInt8]? {
    let heifs = seeds.filter { $0.count > 16 && $0[4..<8].elementsEqual("ftyp".utf8) }
    guard !heifs.isEmpty else { return nil }
    var bytes = heifs[below(heifs.count)]
    for _ in 0..<(1 + below(3)) {
        let boxes = heifBoxes(bytes)
        guard !boxes.isEmpty else { break }
        func any(_ type: String) -> FoundBox? {
            let matching = boxes.filter { $0.type == type }
            return matching.isEmpty ? nil : matching[below(matching.count)]
        }
        switch below(9) {
        case 0:
            // An 'ispe' that lies (version and flags, then width and height).
            if let ispe = any("ispe") { put32(&bytes, ispe.payload + 4 + 4 * below(2), interestingSize()) }
        case 1:
            // A box's size field off by a little, or wildly.
            let box = boxes[below(boxes.count)]
            let size = UInt32(box.end - box.start)
            put32(&bytes, box.start, [0, 1, 7, size - 1, size + 1, size + 8, interestingSize()][below(7)])
        case 2:
            // A box deleted, or repeated after itself.
            let box = boxes[below(boxes.count)]
            if below(2) == 0 { bytes.removeSubrange(box.start..<box.end) } else { bytes.insert(contentsOf: bytes[box.start..<box.end], at: box.end) }
        case 3:
            // Every reference of a 'dimg' (or 'thmb', 'auxl') to its first target: one tile,
            // many times over.
            if let reference = [any("dimg"), any("thmb"), any("auxl")].compactMap({ $0 }).first, reference.payload + 6 <= reference.end {
                let first = Array(bytes[(reference.payload + 4)..<(reference.payload + 6)])
                var at = reference.payload + 6
                while at + 2 <= reference.end { bytes[at] = first[0]; bytes[at + 1] = first[1]; at += 2 }
            }
        case 4:
            // The grid description (in 'idat'): rows, columns, canvas size.
            if let idat = any("idat"), idat.payload + 8 <= idat.end {
                let field = idat.payload + 2 + below(6)
                bytes[field] = UInt8(truncatingIfNeeded: below(2) == 0 ? random.next() : UInt64([0, 1, 39, 255][below(4)]))
            }
        case 5:
            // 'pitm' names another item.
            if let pitm = any("pitm") { put16(&bytes, pitm.payload + 4, UInt16(below(8))) }
        case 6:
            // The decoder configuration (hvcC, av1C): bytes of its parameter sets changed, where
            // the coded size is read from.
            if let config = any("hvcC") ?? any("av1C"), config.end > config.payload + 1 {
                for _ in 0..<(1 + below(4)) { bytes[config.payload + below(config.end - config.payload)] ^= UInt8(1 << below(8)) }
            }
        case 7:
            // An item's property associations (ipma) or locations (iloc) edited.
            if let box = any("ipma") ?? any("iloc"), box.end > box.payload + 4 {
                bytes[box.payload + 4 + below(box.end - box.payload - 4)] = UInt8(truncatingIfNeeded: random.next())
            }
        default:
            // Bit flips inside one box's payload.
            let box = boxes[below(boxes.count)]
            if box.end > box.payload {
                for _ in 0..<(1 + below(8)) { bytes[box.payload + below(box.end - box.payload)] ^= UInt8(1 << below(8)) }
            }
        }
    }
    return bytes
}

/// The HEIF entry point: the scan (the header and the sizes read from the boxes), then a decode
/// into a small or a large cell under a small or the default pool.
func exerciseHEIF(_ path: String) throws(TesseraError) -> String {
    let library = try PhotoLibrary.scan([path])
    guard !library.photos.isEmpty else { return "heif: refused" }
    let side = below(2) == 0 ? 30 : 300
    let decoder = CellDecoder(cellWidth: 1 + below(side), cellHeight: 1 + below(side),
                              decodePoolBytes: below(3) == 0 ? 2 << 20 : 64 << 20)
    let tile = UnsafeMutableRawBufferPointer.allocate(byteCount: decoder.cellBytes, alignment: 16)
    defer { tile.deallocate() }
    let notes = try decoder.decode(path: path, into: tile)
    // Named by how it was drawn, so that a run shows it reached the tile-by-tile path.
    let how = notes.method == .tiles ? "by tiles" : notes.method == .thumbnail ? "from its thumbnail" : "whole"
    return notes.warningCount > 0 ? "heif: with warnings" : "heif: decoded \(how)"
}
