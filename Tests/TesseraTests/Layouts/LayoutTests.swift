// LayoutTests.swift — grid layouts: photo order, repeats, shuffles.
import Glibc
import Testing
@testable import Tessera

@Suite struct LayoutTests {
    @Test func photosRepeatInOrder() {
        let layout = GridLayout.make(photoCount: 3, columns: 4, rows: 2, cellWidth: 10, cellHeight: 10, order: .name)
        #expect(layout.photoIndices == [0, 1, 2, 0, 1, 2, 0, 1])
        #expect(GridLayout.rows(forPhotoCount: 105, columns: 10) == 11)
    }

    @Test func shuffleIsFixedBySeed() {
        let a = GridLayout.make(photoCount: 50, columns: 10, rows: 5, cellWidth: 1, cellHeight: 1, order: .shuffle(seed: 7))
        let b = GridLayout.make(photoCount: 50, columns: 10, rows: 5, cellWidth: 1, cellHeight: 1, order: .shuffle(seed: 7))
        let c = GridLayout.make(photoCount: 50, columns: 10, rows: 5, cellWidth: 1, cellHeight: 1, order: .shuffle(seed: 8))
        #expect(a == b)
        #expect(a != c)
        #expect(Set(a.photoIndices).count == 50)  // a permutation: every photo once
    }

    /// A shuffle over more cells than photos: each pass is shuffled anew (the old single
    /// shuffle repeated every photoCount cells: a 30-column grid of 105 photos every 7 rows),
    /// every photo is used about equally, and no photo touches itself (8 neighbours) from 5
    /// photos up, for many shapes and seeds.
    @Test func shuffledPassesHaveNoPeriodAndNoPhotoTouchesItself() {
        let layout = GridLayout.make(photoCount: 105, columns: 30, rows: 21, cellWidth: 1, cellHeight: 1, order: .shuffle(seed: 1))
        let rows = (0..<21).map { row in (0..<30).map { layout.photo(column: $0, row: row) } }
        #expect(rows[0] != rows[7] && rows[7] != rows[14])
        var uses = [Int](repeating: 0, count: 105)
        for row in rows { for photo in row { uses[photo] += 1 } }
        #expect(uses.min()! >= 5 && uses.max()! <= 7, "\(uses)")
        for (photos, columns, rows) in [(5, 7, 9), (6, 3, 20), (9, 9, 9), (10, 4, 25), (17, 16, 16), (40, 30, 30), (105, 30, 40)] {
            for seed in 1...20 as ClosedRange<UInt64> {
                let grid = GridLayout.make(photoCount: photos, columns: columns, rows: rows, cellWidth: 1, cellHeight: 1,
                                           order: .shuffle(seed: seed))
                var touching = 0
                for row in 0..<rows {
                    for column in 0..<columns {
                        let photo = grid.photo(column: column, row: row)
                        #expect(photo >= 0 && photo < photos)
                        for (dy, dx) in [(0, 1), (1, -1), (1, 0), (1, 1)] {
                            let r = row + dy, c = column + dx
                            if r < rows && c >= 0 && c < columns && grid.photo(column: c, row: r) == photo { touching += 1 }
                        }
                    }
                }
                #expect(touching == 0, "\(photos) photos, \(columns) x \(rows), seed \(seed): \(touching) touching")
            }
        }
        // One pass is the plain shuffle, as before: the same photos once each.
        let single = GridLayout.make(photoCount: 50, columns: 10, rows: 5, cellWidth: 1, cellHeight: 1, order: .shuffle(seed: 7))
        #expect(Set((0..<50).map { single.photo(at: $0) }).count == 50)
    }
}
