// JobTeamTests.swift — batches of jobs on a team of threads.
import Glibc
import Testing
@testable import Tessera

@Suite struct JobTeamTests {
    /// Every job of every batch runs exactly once, whatever the batch sizes, and `run` returns
    /// only when its batch is done.
    @Test func everyJobRunsOnceBeforeRunReturns() throws {
        let team = try JobTeam(helpers: 3)
        let lock = Mutex()
        for size in [0, 1, 2, 7, 130, 1, 64, 0, 500] {
            var counts = [Int](repeating: 0, count: size)
            team.run(jobs: size) { job in lock.withLock { counts[job] += 1 } }
            #expect(counts == [Int](repeating: 1, count: size), "batch of \(size)")
        }
        team.stop()
    }
}
