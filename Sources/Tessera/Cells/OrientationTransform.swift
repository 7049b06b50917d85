// OrientationTransform.swift — the eight EXIF orientations as pixel mappings.

/// How a stored image must be turned to look upright, from the EXIF Orientation tag.
///
/// Tag values: 1 upright, 2 mirrored left-right, 3 turned 180°, 4 mirrored top-bottom,
/// 5 transposed, 6 needs a 90° clockwise turn, 7 transversed, 8 needs a 90° counter-clockwise
/// turn. 0, 9 and other invalid values are treated as 1.
public enum OrientationTransform: Int, Sendable, CaseIterable {
    case identity = 1, mirrorHorizontal, rotate180, mirrorVertical, transpose, rotate90Clockwise,
         transverse, rotate90CounterClockwise

    /// The transform for an EXIF Orientation value; invalid values are upright.
    public init(exifOrientation value: Int) {
        self = OrientationTransform(rawValue: value) ?? .identity
    }

    /// Whether the upright picture's width is the stored height (orientations 5 to 8).
    public var swapsAxes: Bool { rawValue >= 5 }

    /// The stored pixel shown at upright position (`x`, `y`), for a stored image of
    /// `storedWidth` x `storedHeight`.
    @inline(__always)
    public func storedPosition(x: Int, y: Int, storedWidth w: Int, storedHeight h: Int) -> (x: Int, y: Int) {
        switch self {
        case .identity: return (x, y)
        case .mirrorHorizontal: return (w - 1 - x, y)
        case .rotate180: return (w - 1 - x, h - 1 - y)
        case .mirrorVertical: return (x, h - 1 - y)
        case .transpose: return (y, x)
        case .rotate90Clockwise: return (y, h - 1 - x)
        case .transverse: return (w - 1 - y, h - 1 - x)
        case .rotate90CounterClockwise: return (w - 1 - y, x)
        }
    }

    /// Copies the RGB image `stored` (`storedWidth` x `storedHeight`, tightly packed) into
    /// `upright`, turned upright. `upright` holds the swapped size when `swapsAxes`.
    func apply(stored: UnsafeRawBufferPointer, storedWidth: Int, storedHeight: Int,
               upright: UnsafeMutableRawBufferPointer) {
        let uprightWidth = swapsAxes ? storedHeight : storedWidth
        let uprightHeight = swapsAxes ? storedWidth : storedHeight
        precondition(stored.count >= storedWidth * storedHeight * 3 && upright.count >= uprightWidth * uprightHeight * 3)
        if self == .identity {
            upright.copyMemory(from: UnsafeRawBufferPointer(rebasing: stored[0..<(storedWidth * storedHeight * 3)]))
            return
        }
        let source = stored.bindMemory(to: UInt8.self)
        let target = upright.bindMemory(to: UInt8.self)
        for y in 0..<uprightHeight {
            for x in 0..<uprightWidth {
                let (sx, sy) = storedPosition(x: x, y: y, storedWidth: storedWidth, storedHeight: storedHeight)
                let from = (sy * storedWidth + sx) * 3
                let to = (y * uprightWidth + x) * 3
                target[to] = source[from]
                target[to + 1] = source[from + 1]
                target[to + 2] = source[from + 2]
            }
        }
    }
}
