// EntropyCodedDataTests.swift — the check of entropy-coded data (PyramidShare.swift's
// EntropyCodedData), which tiles and a sharded JPEG's stripe segments get: stuffed 0xFF bytes
// pass wherever the data is cut into pieces, a marker is caught even when its 0xFF ends one
// piece and its second byte begins the next, and restart markers pass only where allowed.
import Testing
@testable import Tessera

@Suite struct EntropyCodedDataTests {
    /// `bytes` checked in pieces cut at `cuts`: the byte after the first unstuffed 0xFF, and
    /// whether the data ends on a 0xFF.
    private func scan(_ bytes: [UInt8], cuts: [Int], restarts: Bool = false) -> (marker: UInt8?, endsOnFF: Bool) {
        var check = EntropyCodedData(restarts: restarts)
        var start = 0
        for end in cuts.filter({ $0 > 0 && $0 < bytes.count }).sorted() + [bytes.count] {
            if let byte = bytes[start..<end].withUnsafeBytes({ check.take($0) }) { return (byte, check.endsOnFF) }
            start = end
        }
        return (nil, check.endsOnFF)
    }

    @Test func stuffedDataPassesAndMarkersAreCaughtAcrossPieces() {
        var random = SplitMix64(seed: 9)
        var data: [UInt8] = []
        for _ in 0..<4000 {
            let byte = UInt8(truncatingIfNeeded: random.next())
            data.append(byte)
            if byte == 0xFF { data.append(0x00) }
        }
        #expect(data.contains(0xFF))
        for _ in 0..<200 {
            let cuts = (0..<Int(random.next() % 6)).map { _ in Int(random.next() % UInt64(data.count)) }
            #expect(scan(data, cuts: cuts).marker == nil && !scan(data, cuts: cuts).endsOnFF, "cut at \(cuts)")
        }
        let stuffed = data.indices.filter { data[$0] == 0xFF }
        for at in stuffed.prefix(20) {
            var marked = data
            marked[at + 1] = 0xD9  // an end of image
            // Cut right between the 0xFF and its second byte, and not at all.
            #expect(scan(marked, cuts: [at + 1]).marker == 0xD9 && scan(marked, cuts: []).marker == 0xD9)
            marked[at + 1] = 0xD3  // a restart marker: allowed only in a tile with an interval
            #expect(scan(marked, cuts: [at + 1]).marker == 0xD3 && scan(marked, cuts: [at + 1], restarts: true).marker == nil)
        }
        #expect(scan(data + [0xFF], cuts: [data.count]).endsOnFF)
        #expect(scan([0xFF], cuts: []).endsOnFF)
    }
}
