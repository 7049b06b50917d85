// StripeGeometryTests.swift — which canvas rows each stripe holds.
import Glibc
import Testing
@testable import Tessera

@Suite struct StripeGeometryTests {

    @Test func stripeGeometryCoversEveryRowOnce() {
        let geometry = StripeGeometry(width: 10, height: 100, stripeHeight: 33)
        #expect(geometry.stripeCount == 4)
        #expect((0..<4).flatMap { Array(geometry.rows(ofStripe: $0)) } == Array(0..<100))
    }
}
