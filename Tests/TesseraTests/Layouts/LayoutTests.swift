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
}
